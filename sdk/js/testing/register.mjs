// `node --import register.mjs`: what `gadget test` runs a JavaScript
// plugin's unit tests with (see hooks.mjs).
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
