// Module hooks for a plugin's unit tests in Node: 'gadget-sdk' is the SDK
// the component is built with (exported by name), 'gadget-sdk/testing' the
// test helper, and the component's imports ('gadget:...', 'wasi:...') the
// recording host of host.mjs. A plugin's own .js files are ES modules, as
// `gadget build` reads them.
const HERE = new URL('./', import.meta.url);
const OWN = {
  'gadget-sdk': 'gadget-sdk.mjs',
  'gadget-sdk/testing': 'testing.mjs',
};

export async function resolve(specifier, context, next) {
  if (OWN[specifier]) {
    return { url: new URL(OWN[specifier], HERE).href, format: 'module', shortCircuit: true };
  }
  if (/^(gadget|wasi):/.test(specifier)) {
    return { url: new URL('host.mjs', HERE).href, format: 'module', shortCircuit: true };
  }
  const resolved = await next(specifier, context);
  if (resolved.url.startsWith('file:') && resolved.url.endsWith('.js') && !resolved.url.includes('/node_modules/')) {
    return { ...resolved, format: 'module' };
  }
  return resolved;
}
