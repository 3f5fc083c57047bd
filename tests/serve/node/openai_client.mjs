// The official OpenAI client for Node against a running `vispco serve`: one image chat completion, not
// streamed and streamed, the model list, and one refused request. Prints one JSON object for
// tests/serve/test_openai_node.cpp. Usage: node openai_client.mjs PORT IMAGE.png QUESTION
import fs from 'node:fs';
import OpenAI from 'openai';

const [port, image, question] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'not-needed', maxRetries: 0 });
const url = 'data:image/png;base64,' + fs.readFileSync(image).toString('base64');
const messages = [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: question }] }];

const plain = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 6 });
const stream = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 6, stream: true });
let streamed = '';
let streamFinish = null;
for await (const chunk of stream) {
  const c = chunk.choices[0];
  if (!c) continue;
  streamed += c.delta?.content ?? '';
  if (c.finish_reason) streamFinish = c.finish_reason;
}
const models = await client.models.list();
let refusedStatus = null;
try {
  await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'no image' }] });
} catch (e) {
  refusedStatus = e.status ?? -1;
}
console.log(JSON.stringify({
  content: plain.choices[0].message.content,
  finish: plain.choices[0].finish_reason,
  usage: plain.usage,
  streamed,
  stream_finish: streamFinish,
  models: models.data.map((m) => m.id),
  refused_status: refusedStatus,
}));
