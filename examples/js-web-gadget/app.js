// HTTP from a JavaScript gadget: the standard fetch(), which the host sends
// only to the origins the operator grants this plugin.
// Build: gadget build examples/js-web-gadget   (SpiderMonkey: plugin.toml asks for http)
// Run:   gadget --plugins examples/js-web-gadget --grant js-web:http=https://example.com \
//          call HttpStatus --params '{"url": "https://example.com/"}'
import { defineGadget, exportGadgets, result, config, urlParam } from 'gadget-sdk';

const HttpStatus = defineGadget({
  name: 'HttpStatus',
  label: 'HTTP status',
  description: 'Fetches a URL (GET, or POST with a body) and returns its status code and the start of its body.',
  schema: {
    type: 'object',
    properties: {
      url: urlParam('The URL to fetch.'),
      body: { type: 'string', description: 'Send this body with POST instead of a GET.' },
    },
    required: ['url'],
  },
  examples: [{ params: { url: 'https://example.com/' }, output: '200 <!doctype html>...' }],
  // An async run may await fetch(); the host's deadline and abort signal
  // stop the request, whatever the gadget does.
  async run(params, ctx) {
    // A config value the operator grants (`[plugins.js-web] config =
    // { API_TOKEN = { env = "VAR" } }`); null when not granted.
    const token = config('API_TOKEN');
    let response;
    try {
      const headers = token ? { authorization: `Bearer ${token}` } : {};
      response = params.body === undefined
        ? await fetch(params.url, { headers })
        : await fetch(params.url, { method: 'POST', headers, body: params.body });
    } catch (e) {
      // A refused request is a network error here; the host's log of the
      // call names the grant that would allow it.
      throw new Error(`the host refused the request or it failed: ${e.message || e}`);
    }
    const body = await response.text();
    ctx.info('fetched', { status: response.status, bytes: body.length });
    return result(`${response.status} ${body.slice(0, 200)}`, {
      details: { bytes: body.length, content_type: response.headers.get('content-type') },
    });
  },
});

export const gadget = exportGadgets(HttpStatus);
