// The official OpenAI client for Node holds a three-turn conversation with a running `vispco serve`: a system
// message, the image with the first question, then two follow-up questions, each request carrying the
// answers so far as assistant turns (the third one streamed). Prints one JSON object for
// tests/serve/test_openai_node.cpp. Usage: node openai_chat.mjs PORT IMAGE.png SYSTEM Q1 Q2 Q3
import fs from 'node:fs';
import OpenAI from 'openai';

const [port, image, system, ...questions] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'not-needed', maxRetries: 0 });
const url = 'data:image/png;base64,' + fs.readFileSync(image).toString('base64');
const messages = [
  { role: 'system', content: system },
  { role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: questions[0] }] },
];
const answers = [];
const cache = [];
for (let t = 0; t < questions.length; ++t) {
  if (t > 0) messages.push({ role: 'user', content: questions[t] });
  let answer = '';
  if (t < questions.length - 1) {
    const r = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 6 });
    answer = r.choices[0].message.content;
    cache.push(r.vispco?.image_cache ?? null);
  } else {
    const stream = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 6, stream: true });
    for await (const chunk of stream) {
      if (chunk.vispco) cache.push(chunk.vispco.image_cache ?? null);
      const c = chunk.choices[0];
      if (c) answer += c.delta?.content ?? '';
    }
  }
  answers.push(answer);
  messages.push({ role: 'assistant', content: answer });
}
console.log(JSON.stringify({ answers, image_cache: cache }));
