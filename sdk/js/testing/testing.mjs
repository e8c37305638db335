// A gadget's code in a unit test, without building it (llmist's
// `testGadget`): `call` runs it in Node through the same SDK the
// component is built with, and what it asks of the host (logs, costs,
// progress, updates, questions, completions, configuration) is recorded or
// answered here:
//
//     import { test } from 'node:test';
//     import assert from 'node:assert/strict';
//     import { call, assertExamples } from 'gadget-sdk/testing';
//     import { gadget } from './app.js';
//
//     test('counts words', async () => {
//       const done = await call(gadget, 'WordCount', { text: 'one two three' });
//       assert.equal(done.result, '3 words');
//       await assertExamples(gadget);
//     });
//
// The parameters get the schema's top-level defaults and its `required`
// check, as the host's validation would; the rest of the schema (types,
// bounds, patterns) is the host's to enforce, so `gadget test` runs the
// real component for those. fetch() here is Node's, not the host's door:
// grants are tested against the component.

// What `ctx.timeLeftMs()` says in a test call, unless given.
export const DEFAULT_TIME_LEFT_MS = 30000;

function prepared(spec, params) {
  const schema = spec.parametersSchema ? JSON.parse(spec.parametersSchema) : {};
  const filled = { ...params };
  for (const [name, prop] of Object.entries(schema.properties || {})) {
    if (!(name in filled) && prop && typeof prop === 'object' && 'default' in prop) filled[name] = prop.default;
  }
  const missing = (schema.required || []).filter((name) => !(name in filled));
  if (missing.length) {
    throw { tag: 'invalid-arguments', val: `missing required parameter(s): ${missing.join(', ')}` };
  }
  return filled;
}

// The recording host of one call.
class TestHost {
  constructor({ timeLeftMs = DEFAULT_TIME_LEFT_MS, cancelled = false, answers = {}, config = {}, completions = [] }) {
    Object.assign(this, { timeLeftMs, cancelled, answers, config, completions: [...completions] });
    this.logs = [];
    this.cost = 0;
    this.progressMessages = [];
    this.updates = [];
    this.asked = [];
    this.prompts = [];
  }
  log(level, message, fields) { this.logs.push([level, message, fields ? JSON.parse(fields) : undefined]); }
  reportCost(usd) { this.cost += Number(usd); }
  progress(message) { this.progressMessages.push(message); }
  reportProgress(done, total, message) {
    const shown = total === undefined ? `${done}` : `${done}/${total}`;
    this.progressMessages.push(message ? `${shown}: ${message}` : shown);
  }
  update(partial) { this.updates.push(partial); }
  complete(request) {
    this.prompts.push(request.messages);
    if (!this.completions.length) {
      throw { payload: { tag: 'denied', val: 'no completion in this test: pass { completions: [...] } to call()' } };
    }
    const text = String(this.completions.shift());
    return { text, model: request.model || 'test:model', inputTokens: 0n, outputTokens: 0n, cost: 0 };
  }
  ask(questions) {
    return questions.map(({ key, question }) => {
      this.asked.push(key);
      if (!(key in this.answers)) return { tag: 'declined' };
      const answer = this.answers[key];
      return question.tag === 'form' ? { tag: 'form', val: JSON.stringify(answer) } : { tag: 'text', val: String(answer) };
    });
  }
  answerable() {
    const some = Object.keys(this.answers).length > 0;
    return { text: some, form: some, sample: false, roots: false };
  }
}

// Runs gadget `name` of an `exportGadgets(...)` export on `params`; the
// options set the host's side: { timeLeftMs, cancelled, answers: { key:
// answer }, config: { KEY: value }, completions: [text, ...] }. Resolves
// to { result, finished, parts, details, structured, error, errorKind,
// params, cost, logs, progress, updates, asked, prompts }: `result` is the
// text the model reads (null on an error), `errorKind` one of
// invalid-arguments, failed, cancelled.
export async function call(exported, name, params = {}, options = {}) {
  const spec = exported.specs().find((s) => s.name === name);
  if (!spec) throw new TypeError(`no gadget '${name}' in this export`);
  const host = new TestHost(options);
  const done = { result: null, finished: false, parts: [], details: undefined, structured: undefined, error: null, errorKind: null };
  globalThis.__gadgetTestCall = host;
  try {
    done.params = prepared(spec, params);
    const outcome = await exported.invoke('gadget_test', name, JSON.stringify(done.params));
    const value = outcome.val;
    done.finished = outcome.tag === 'finish';
    done.parts = value.content.map((p) => (p.tag === 'text' ? p.val : p));
    done.result = value.content.filter((p) => p.tag === 'text').map((p) => p.val).join('\n');
    done.details = value.details === undefined ? undefined : JSON.parse(value.details);
    done.structured = value.structured === undefined ? undefined : JSON.parse(value.structured);
    host.cost += value.cost || 0;
  } catch (e) {
    if (e && typeof e === 'object' && typeof e.tag === 'string') {
      done.errorKind = e.tag;
      done.error = e.tag === 'cancelled' ? 'cancelled' : String(e.val);
    } else {
      throw e;
    }
  } finally {
    globalThis.__gadgetTestCall = undefined;
  }
  return Object.assign(done, {
    cost: host.cost,
    logs: host.logs,
    progress: host.progressMessages,
    updates: host.updates,
    asked: host.asked,
    prompts: host.prompts,
  });
}

// Runs every example of every gadget of the export (or of `name`); throws
// naming each that fails or whose result differs from its output (ends
// trimmed): what the model is shown must be what the gadget does.
export async function assertExamples(exported, name) {
  const wrong = [];
  for (const spec of exported.specs()) {
    if (name !== undefined && spec.name !== name) continue;
    for (const [i, example] of spec.examples.entries()) {
      const params = JSON.parse(example.params);
      const done = await call(exported, spec.name, params);
      const shown = `${spec.name} example ${i + 1} (${example.params})`;
      if (done.error !== null) wrong.push(`${shown}: ${done.errorKind}: ${done.error}`);
      else if (example.output !== undefined && done.result.trim() !== example.output.trim()) {
        wrong.push(`${shown}:\n  expected: ${example.output.trim()}\n  got:      ${done.result.trim()}`);
      }
    }
  }
  if (wrong.length) throw new Error(`${wrong.length} example(s) do not hold:\n${wrong.join('\n')}`);
}
