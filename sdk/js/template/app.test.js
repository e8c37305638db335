// Unit tests of __GADGET__'s code, in Node, without building: `gadget test .`
// runs them (then the component itself, against the examples and tests.toml).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { call, assertExamples } from 'gadget-sdk/testing';
import { gadget } from './app.js';

test('counts the words', async () => {
  const done = await call(gadget, '__GADGET__', { text: 'one two three' });
  assert.equal(done.result, '3 words');
  assert.deepEqual(done.details, { words: 3 });
  assert.deepEqual(done.logs, [['info', 'counted', { words: 3 }]]);
});

test('a text without words is invalid', async () => {
  const done = await call(gadget, '__GADGET__', { text: '   ' });
  assert.equal(done.errorKind, 'invalid-arguments');
});

test('the examples the model is shown hold', async () => {
  await assertExamples(gadget);
});
