// __GADGET__: a gadget for gadget-host, in JavaScript.
// Build: gadget build .    Check: gadget check .
import { defineGadget, exportGadgets, InvalidArguments, result } from 'gadget-sdk';

const __GADGET__ = defineGadget({
  name: '__GADGET__',
  description: 'Counts the words of a text. Describe here, for the model, what the gadget does.',
  schema: {
    type: 'object',
    properties: { text: { type: 'string', description: 'The text to count the words of.' } },
    required: ['text'],
  },
  examples: [{ params: { text: 'hello world' }, output: '2 words' }],
  run(params, ctx) {
    const words = params.text.split(/\s+/).filter(Boolean).length;
    if (words === 0) throw new InvalidArguments('text has no words');
    ctx.info('counted', { words });
    return result(`${words} words`, { details: { words } });
  },
});

export const gadget = exportGadgets(__GADGET__);
