// URL slugs, written in JavaScript: the JS SDK's example plugin.
// Build: gadget build examples/js-gadget
import { defineGadget, exportGadgets, InvalidArguments, Cancelled, result, config, complete } from 'gadget-sdk';

const Slugify = defineGadget({
  name: 'Slugify',
  label: 'URL slug',
  description: 'Turns a title into a URL slug: lower case, ASCII letters and digits, words joined by a separator.',
  schema: {
    type: 'object',
    properties: {
      title: { type: 'string', description: 'The title to turn into a slug.' },
      separator: { type: 'string', enum: ['-', '_'], default: '-', description: 'What joins the words.' },
    },
    required: ['title'],
  },
  examples: [
    { params: { title: 'Hello, World!' }, output: 'hello-world' },
    { params: { title: 'Crème brûlée recipes', separator: '_' }, output: 'creme_brulee_recipes', comment: 'Accents are dropped' },
  ],
  run(params, ctx) {
    const words = params.title
      .normalize('NFD')
      .replace(/[\u0300-\u036f]/g, '')
      .toLowerCase()
      .split(/[^a-z0-9]+/)
      .filter(Boolean);
    if (words.length === 0) throw new InvalidArguments('title has no letters or digits to make a slug of');
    ctx.info('slugified', { words: words.length });
    ctx.reportCost(0.0002);
    return result(words.join(params.separator), { details: { words: words.length } });
  },
});

const WorkUntilCancelled = defineGadget({
  name: 'WorkUntilCancelled',
  description: 'Works until told to stop: shows how a JavaScript gadget honours the abort signal.',
  schema: { type: 'object', properties: {} },
  run(params, ctx) {
    for (let rounds = 1; ; rounds++) {
      if (rounds % 100000 === 0) ctx.progress(`${rounds} rounds`);
      if (ctx.cancelled()) {
        ctx.warn('stopping on the abort signal', { rounds });
        throw new Cancelled();
      }
    }
  },
});

// A config value the operator grants (`[plugins.js-slug] config = { GREETING
// = { value = "Bonjour" } }`); null when not granted.
const Greet = defineGadget({
  name: 'Greet',
  description: "Greets someone with the operator's configured greeting (Hello by default).",
  schema: {
    type: 'object',
    properties: { name: { type: 'string', description: 'Who to greet.' } },
    required: ['name'],
  },
  run(params) {
    return `${config('GREETING') ?? 'Hello'}, ${params.name}!`;
  },
});

// The host's LLM, only with the operator's grant (`[plugins.js-slug] llm =
// { models = [...] }`); the completion's cost is added to the call.
const Headline = defineGadget({
  name: 'Headline',
  description: "Writes a short headline for a text, with the host's LLM.",
  schema: {
    type: 'object',
    properties: { text: { type: 'string', description: 'The text to title.' } },
    required: ['text'],
  },
  run(params) {
    const answer = complete(params.text, {
      system: 'Write one short headline for the text. Reply with the headline only.',
      maxTokens: 40,
    });
    return result(answer.text, { details: { model: answer.model, cost_usd: answer.cost } });
  },
});

export const gadget = exportGadgets(Slugify, WorkUntilCancelled, Greet, Headline);
