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
// `gadget build DIR` puts this module in front of the app (the app's
// `import ... from 'gadget-sdk'` line is dropped), so everything here is
// in scope. The host validates parameters against the schema (after
// filling in defaults) before `run`, so a gadget can trust their shape.

import {
  log as hostLog,
  reportCost as hostReportCost,
  progress as hostProgress,
  update as hostUpdate,
  cancelled as hostCancelled,
  callInfo as hostCallInfo,
} from 'gadget:plugin/host@0.2.0';
import { getEnvironment } from 'wasi:cli/environment@0.2.12';
import { complete as hostComplete } from 'gadget:plugin/llm@0.2.0';

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

// A result for the model, with an optional cost (USD) and details for people.
function result(text, { cost, details } = {}) {
  return { [OUTCOME]: 'result', text: String(text), cost, details };
}

// The task is complete: the agent loop ends after this response.
function finish(text, { cost, details } = {}) {
  return { [OUTCOME]: 'finish', text: String(text), cost, details };
}

// A question for a person; the answer becomes the call's result.
function askHuman(question) {
  return { [OUTCOME]: 'ask-human', text: String(question) };
}

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
  return {
    result: outcome.text,
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
function outcome(name, value) {
  if (typeof value === 'string') {
    return { tag: 'result', val: { result: value, cost: undefined, details: undefined } };
  }
  switch (value && value[OUTCOME]) {
    case 'result': return { tag: 'result', val: callResult(value) };
    case 'finish': return { tag: 'finish', val: callResult(value) };
    case 'ask-human': return { tag: 'ask-human', val: value.text };
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
      try {
        value = def.run(JSON.parse(params || '{}'), new Context(invocationId));
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
        return value.then((settled) => outcome(name, settled), (e) => { throw gadgetError(e); });
      }
      return outcome(name, value);
    },
  };
}
