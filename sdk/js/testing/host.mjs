// The component's imports in a unit test: each goes to the test call in
// progress (testing.mjs sets it), which records it or answers it.
const current = () => {
  const call = globalThis.__gadgetTestCall;
  if (!call) throw new Error('the host is only here during testing.call(...)');
  return call;
};

export const log = (level, message, fields) => current().log(level, message, fields);
export const reportCost = (usd) => current().reportCost(usd);
export const progress = (message) => current().progress(message);
export const reportProgress = (done, total, message) => current().reportProgress(done, total, message);
export const update = (partial, details) => current().update(partial, details);
export const cancelled = () => current().cancelled;
export const callInfo = () => ({ timeLeftMs: current().timeLeftMs });
export const getEnvironment = () => Object.entries(current().config);
export const complete = (request) => current().complete(request);
export const ask = (questions) => current().ask(questions);
export const answerable = () => current().answerable();
