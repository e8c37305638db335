// gadget-sdk for JavaScript: write gadgets for gadget-host as WebAssembly
// components. `gadget build` picks the engine from the manifest:
// - QuickJS (componentize-qjs --sync), the default: a 1.5 MiB component
//   whose fresh instance costs about 0.15 ms;
// - SpiderMonkey (componentize-js, StarlingMonkey) when `[permissions]`
//   asks for `http`: the standard `fetch()` runs over wasi:http (the host
//   sends only what the operator grants), and `run` may be `async`. The
//   component is about 12 MiB and a fresh instance about 0.6 ms.
//
// An app imports what it needs from 'gadget-sdk' and exports `gadget`:
//
//     import { defineGadget, exportGadgets, InvalidArguments, result } from 'gadget-sdk';
//
// (A URL or path parameter's schema is `urlParam('...')` or
// `pathParam('...')`: the host's rules then match it by meaning.)
//
//     const WordCount = defineGadget({
//       name: 'WordCount',
//       description: 'Counts the words of a text.',
//       schema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
//       examples: [{ params: { text: 'hello world' }, output: '2 words' }],
//       run(params, ctx) {
//         const words = params.text.split(/\s+/).filter(Boolean).length;
//         if (!words) throw new InvalidArguments('text has no words');
//         ctx.info('counted', { words });
//         return result(`${words} words`, { cost: 0.001, details: { words } });
//       },
//     });
//
//     export const gadget = exportGadgets(WordCount);
//
// It speaks contract gadget:plugin@0.3.0: results in parts (image(),
// audio(), embedded(), link()), `ctx.ask` (questions the running gadget
// gets answered), `ctx.reportProgress`, and `exportCatalog` for resources
// and prompts.
//
// `gadget build DIR` puts this module in front of the app (the app's
// `import ... from 'gadget-sdk'` line is dropped), so everything here is
// in scope. The host validates parameters against the schema (after
// filling in defaults) before `run`, so a gadget can trust their shape.

import {
  log as hostLog,
  reportCost as hostReportCost,
  progress as hostProgress,
  reportProgress as hostReportProgress,
  update as hostUpdate,
  cancelled as hostCancelled,
  callInfo as hostCallInfo,
} from 'gadget:plugin/host@0.3.0';
import { getEnvironment } from 'wasi:cli/environment@0.2.12';
import { complete as hostComplete } from 'gadget:plugin/llm@0.3.0';
import { ask as hostAsk, answerable as hostAnswerable } from 'gadget:plugin/ask@0.3.0';

// Which engine this build runs on ('quickjs' or 'spidermonkey'); `gadget
// build` defines GADGET_JS_ENGINE in front of this module.
const ENGINE = typeof GADGET_JS_ENGINE === 'string' ? GADGET_JS_ENGINE : 'quickjs';

// A configuration value the operator granted this plugin (its manifest asks
// for the key under `[permissions] config`), or null. Granted values are
// the instance's environment; nothing else of the host's is there. Secret
// values are redacted from everything the gadget sends back.
function config(key) {
  const found = getEnvironment().find(([name]) => name === key);
  return found ? found[1] : null;
}

// No completion: denied (not granted, or not this model), the call's budget
// exceeded, or the provider failed; the message says which and why.
class LlmError extends Error {}

// One completion from the host's LLM: `complete('text', { system, model,
// maxTokens, temperature })`, or `complete([['system', '...'], ['user',
// '...']])`. The manifest asks with `[permissions] llm = true`; the operator
// grants models and a per-call budget; the cost is added to the call's by the
// host. Returns { text, model, inputTokens, outputTokens, cost }; throws
// LlmError, or Cancelled when the call's deadline passes during it.
function complete(prompt, { system, model, maxTokens, temperature } = {}) {
  const pairs = typeof prompt === 'string' ? [['user', prompt]] : [...prompt];
  if (system !== undefined) pairs.unshift(['system', system]);
  for (const [role] of pairs) {
    if (!['system', 'user', 'assistant'].includes(role)) {
      throw new TypeError(`message role '${role}' is not system, user or assistant`);
    }
  }
  let answer;
  try {
    answer = hostComplete({
      messages: pairs.map(([role, content]) => ({ role, content: String(content) })),
      model,
      maxTokens,
      temperature,
    });
  } catch (e) {
    // The import's error arrives as the thrown value (or its payload).
    const failure = e && typeof e === 'object' && 'payload' in e ? e.payload : e;
    const tag = failure && failure.tag;
    if (tag === 'deadline') throw new Cancelled("the call's deadline passed during a completion");
    const what = { denied: 'LLM denied', 'budget-exceeded': 'LLM budget exceeded', provider: 'LLM provider failed' }[tag];
    if (what) throw new LlmError(`${what}: ${failure.val}`);
    throw e;
  }
  return {
    text: answer.text,
    model: answer.model,
    inputTokens: Number(answer.inputTokens),
    outputTokens: Number(answer.outputTokens),
    cost: answer.cost,
  };
}

// The parameters are unusable; the message tells the model what to change.
class InvalidArguments extends Error {}

// The gadget stopped on the abort signal (`ctx.cancelled()`).
class Cancelled extends Error {
  constructor(message = 'cancelled') {
    super(message);
  }
}

const OUTCOME = Symbol('gadget-outcome');

// A result for the model: its text, then other `parts` (image(), audio(),
// embedded(), link()), the same result as JSON (`structured`, for MCP
// clients), a cost (USD) and details for people.
function result(text, { cost, details, parts, structured } = {}) {
  return { [OUTCOME]: 'result', text: String(text), cost, details, parts, structured };
}

// The task is complete: the agent loop ends after this response.
function finish(text, { cost, details, parts, structured } = {}) {
  return { [OUTCOME]: 'finish', text: String(text), cost, details, parts, structured };
}

// A question for a person; the answer becomes the call's result (asked
// through `ctx.ask`, which contract 0.3.0 gives the running gadget).
function askHuman(question) {
  return { [OUTCOME]: 'ask-human', text: String(question) };
}

// Parts of a result (or of a prompt's message).
function image(data, mimeType = 'image/png') {
  return { tag: 'image', val: { mimeType, data: Uint8Array.from(data) } };
}
function audio(data, mimeType = 'audio/wav') {
  return { tag: 'audio', val: { mimeType, data: Uint8Array.from(data) } };
}
// A resource's contents: `{ text }` or `{ blob }` (bytes), named by its URI.
function embedded(uri, { text, blob, mimeType } = {}) {
  return { tag: 'resource', val: contents(uri, { text, blob, mimeType }) };
}
function link(uri, name, { title, description, mimeType } = {}) {
  return { tag: 'resource-link', val: { uri, name, title, description, mimeType } };
}
function contents(uri, { text, blob, mimeType }) {
  if ((text === undefined) === (blob === undefined)) {
    throw new TypeError(`resource '${uri}' needs text or blob (one of them)`);
  }
  const body = text !== undefined ? { tag: 'text', val: String(text) } : { tag: 'blob', val: Uint8Array.from(blob) };
  return { uri, mimeType, body };
}
function part(value) {
  return typeof value === 'string' ? { tag: 'text', val: value } : value;
}

// Questions for `ctx.ask({ key: question, ... })`.
const question = {
  text: (words) => ({ tag: 'text', val: String(words) }),
  // A form: a message and the JSON Schema of the answer object.
  form: (message, schema) => ({ tag: 'form', val: { message: String(message), schema: JSON.stringify(schema) } }),
  // A completion by the MCP client's model.
  sample: (prompt, maxTokens, system) => ({
    tag: 'sample',
    val: { messages: [{ role: 'user', content: String(prompt) }], systemPrompt: system, maxTokens },
  }),
  // The MCP client's roots: a list of { uri, name }.
  roots: () => ({ tag: 'roots' }),
};

// No answers came: nobody here answers this kind (the message says who
// would), the wait's bound passed, or the questions are not well formed.
class AskError extends Error {}

// What a gadget can ask of the host during a call.
class Context {
  constructor(invocationId) {
    this.invocationId = invocationId;
  }
  log(level, message, fields) {
    hostLog(level, String(message), fields === undefined ? '' : JSON.stringify(fields));
  }
  debug(message, fields) { this.log('debug', message, fields); }
  info(message, fields) { this.log('info', message, fields); }
  warn(message, fields) { this.log('warn', message, fields); }
  error(message, fields) { this.log('error', message, fields); }
  // Reports a cost in USD; kept even if the call later fails.
  reportCost(usd) { hostReportCost(Number(usd)); }
  // A short status line for people.
  progress(message) { hostProgress(String(message)); }
  // A partial result for live display (never shown to the model).
  update(partial, details) {
    hostUpdate(String(partial), details === undefined ? undefined : JSON.stringify(details));
  }
  // True once the deadline has passed or the run was cancelled.
  cancelled() { return hostCancelled(); }
  // Throws Cancelled once the abort signal is up: `ctx.checkCancelled()` in loops.
  checkCancelled() {
    if (hostCancelled()) throw new Cancelled();
  }
  // Milliseconds until the call's deadline.
  timeLeftMs() { return Number(hostCallInfo().timeLeftMs); }
  // Progress as numbers; each report must be more than the last.
  reportProgress(done, total, message) {
    hostReportProgress(Number(done), total === undefined ? undefined : Number(total), message);
  }
  // The kinds of question this call can have answered: { text, form, sample, roots }.
  answerable() { return hostAnswerable(); }
  // Asks every question at once ({ key: question.text(...), ... }) and
  // returns the answers by key: a string for text and sample, an object for
  // a form, a list for roots, null when declined or dismissed. Ask before
  // acting: over stateless HTTP the gadget runs again from the start with
  // the answers so far. Throws AskError, or Cancelled.
  ask(questions) {
    const keys = Object.keys(questions);
    let answers;
    try {
      answers = hostAsk(keys.map((key) => ({ key, question: questions[key] })));
    } catch (e) {
      const failure = e && typeof e === 'object' && 'payload' in e ? e.payload : e;
      const tag = failure && failure.tag;
      if (tag === 'cancelled') throw new Cancelled('cancelled while waiting for an answer');
      if (tag === 'timeout') throw new AskError('no answer came in time');
      if (tag === 'invalid') throw new AskError(`the questions are not well formed: ${failure.val}`);
      if (tag === 'unavailable') throw new AskError(`no one can answer: ${failure.val}`);
      throw e;
    }
    const found = {};
    keys.forEach((key, i) => {
      const answer = answers[i];
      switch (answer.tag) {
        case 'text': case 'sample': found[key] = answer.val; break;
        case 'form': found[key] = JSON.parse(answer.val); break;
        case 'roots': found[key] = answer.val.map((r) => ({ uri: r.uri, name: r.name })); break;
        default: found[key] = null;
      }
    });
    return found;
  }
  // One question in words; null when declined.
  askText(words) { return this.ask({ answer: question.text(words) }).answer; }
}

// A parameter that is a URL, or a path: its schema says so (`format`), so
// the operator's rules on it match what it means, not how it is spelled
// (`HTTP://x` is `http://x`, `/out/./a` is `/out/a`):
//   properties: { url: urlParam('The page.'), path: pathParam('The file.') }
function urlParam(description, more = {}) {
  return { type: 'string', format: 'uri', ...(description ? { description } : {}), ...more };
}
function pathParam(description, more = {}) {
  return { type: 'string', format: 'path', ...(description ? { description } : {}), ...more };
}

// Declares a gadget: { name, description, schema?, examples?, label?,
// timeoutMs?, exclusive?, maxConcurrent?, run(params, ctx) }.
function defineGadget(def) {
  for (const field of ['name', 'description']) {
    if (typeof def[field] !== 'string' || !def[field]) {
      throw new TypeError(`defineGadget: '${field}' must be a non-empty string`);
    }
  }
  if (typeof def.run !== 'function') {
    throw new TypeError(`defineGadget(${def.name}): 'run' must be a function (params, ctx)`);
  }
  return def;
}

function callResult(outcome) {
  const content = (outcome.text ? [outcome.text] : []).concat(outcome.parts || []).map(part);
  return {
    content,
    structured: outcome.structured === undefined ? undefined : JSON.stringify(outcome.structured),
    cost: outcome.cost === undefined ? undefined : Number(outcome.cost),
    details: outcome.details === undefined ? undefined : JSON.stringify(outcome.details),
  };
}

// What `run` threw, as the contract's gadget-error.
function gadgetError(e) {
  if (e instanceof InvalidArguments) return { tag: 'invalid-arguments', val: e.message };
  if (e instanceof Cancelled) return { tag: 'cancelled' };
  return { tag: 'failed', val: (e && e.message) || String(e) };
}

// What `run` returned, as the contract's outcome.
function outcome(name, value, ctx) {
  if (typeof value === 'string') {
    return { tag: 'result', val: callResult({ text: value }) };
  }
  switch (value && value[OUTCOME]) {
    case 'result': return { tag: 'result', val: callResult(value) };
    case 'finish': return { tag: 'finish', val: callResult(value) };
    case 'ask-human': {
      let answer;
      try {
        answer = ctx.askText(value.text);
      } catch (e) {
        throw gadgetError(e);
      }
      if (answer === null) throw { tag: 'failed', val: 'the person declined to answer' };
      return { tag: 'result', val: callResult({ text: answer }) };
    }
    default:
      throw {
        tag: 'failed',
        val: `gadget '${name}' returned ${typeof value}; return a string, result(), finish() or askHuman()`,
      };
  }
}

// The component's export: `export const gadget = exportGadgets(A, B);`.
function exportGadgets(...defs) {
  const byName = new Map();
  for (const def of defs) {
    if (byName.has(def.name)) throw new TypeError(`gadget '${def.name}' is exported twice`);
    byName.set(def.name, def);
  }
  return {
    specs() {
      return defs.map((def) => ({
        name: def.name,
        label: def.label,
        description: def.description,
        parametersSchema: def.schema === undefined ? '' : JSON.stringify(def.schema),
        examples: (def.examples || []).map((ex) => ({
          params: JSON.stringify(ex.params),
          output: ex.output,
          comment: ex.comment,
        })),
        timeoutMs: def.timeoutMs,
        exclusive: Boolean(def.exclusive),
        maxConcurrent: def.maxConcurrent,
      }));
    },
    invoke(invocationId, name, params) {
      const def = byName.get(name);
      if (!def) throw { tag: 'failed', val: `this component has no gadget '${name}'` };
      let value;
      const ctx = new Context(invocationId);
      try {
        value = def.run(JSON.parse(params || '{}'), ctx);
      } catch (e) {
        throw gadgetError(e);
      }
      if (value && typeof value.then === 'function') {
        if (ENGINE !== 'spidermonkey') {
          // QuickJS's synchronous ABI cannot wait for a promise.
          throw {
            tag: 'failed',
            val: `gadget '${name}' is async, which needs the SpiderMonkey build: ask for http under [permissions] in plugin.toml`,
          };
        }
        // SpiderMonkey runs the event loop (fetch included) until it settles.
        return value.then((settled) => outcome(name, settled, ctx), (e) => { throw gadgetError(e); });
      }
      return outcome(name, value, ctx);
    },
  };
}

// The resources and prompts a component serves: `export const catalog =
// exportCatalog({ resources, templates, prompts })`, each resource `{ uri,
// name, description?, mimeType?, read(uri) }`, each template `{
// uriTemplate, name, description?, mimeType?, read(uri) }` (`read` returns
// text, bytes, or null when there is no such resource), each prompt `{
// name, description?, arguments: [{ name, description?, required?,
// examples? }], render(args) }` (`render` returns [[role, part], ...]).
// `gadget build` exports an empty catalog when the app exports none.
function exportCatalog({ resources = [], templates = [], prompts = [] } = {}) {
  const readResult = (uri, mimeType, value) => {
    if (value === null || value === undefined) throw { tag: 'not-found' };
    const body = typeof value === 'string' ? { text: value } : { blob: value };
    return [contents(uri, { ...body, mimeType })];
  };
  return {
    resources() {
      return resources.map(({ uri, name, title, description, mimeType, size }) => ({
        uri, name, title, description, mimeType, size: size === undefined ? undefined : BigInt(size),
      }));
    },
    resourceTemplates() {
      return templates.map(({ uriTemplate, name, title, description, mimeType }) => ({
        uriTemplate, name, title, description, mimeType,
      }));
    },
    prompts() {
      return prompts.map(({ name, title, description, arguments: args = [] }) => ({
        name, title, description,
        arguments: args.map((a) => ({
          name: a.name, description: a.description, required: Boolean(a.required), examples: a.examples || [],
        })),
      }));
    },
    readResource(uri) {
      const fixed = resources.find((r) => r.uri === uri);
      const template = fixed ? undefined : templates.find((t) => matches(t.uriTemplate, uri));
      const found = fixed || template;
      if (!found) throw { tag: 'not-found' };
      let value;
      try {
        value = found.read(uri);
      } catch (e) {
        throw { tag: 'failed', val: (e && e.message) || String(e) };
      }
      return readResult(uri, found.mimeType, value);
    },
    getPrompt(name, args) {
      const prompt = prompts.find((p) => p.name === name);
      if (!prompt) throw { tag: 'failed', val: `this component has no prompt '${name}'` };
      let messages;
      try {
        messages = prompt.render(Object.fromEntries(args));
      } catch (e) {
        throw gadgetError(e);
      }
      return {
        description: prompt.description,
        messages: messages.map(([role, value]) => ({ role, content: part(value) })),
      };
    },
    complete() {
      return [];
    },
  };
}

// Whether `uri` matches a URI template of simple `{name}` expressions.
function matches(template, uri) {
  const pattern = template
    .split(/(\{[A-Za-z0-9_]+\})/)
    .map((piece) => (piece.startsWith('{') ? '[^/]+' : piece.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${pattern}$`).test(uri);
}
