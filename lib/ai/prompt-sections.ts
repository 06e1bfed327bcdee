/**
 * The agents build prompts from tagged sections (`<request>…</request>`). Hosted models read them as ordinary
 * structure; the demo model reads them to follow the instructions written into the request.
 */

export function section(name: string, content: string): string {
  return `<${name}>\n${content.trim()}\n</${name}>`;
}

/** The content of the last `<name>` section in a text, or undefined. */
export function readSection(text: string, name: string): string | undefined {
  const open = `<${name}>`;
  const close = `</${name}>`;
  const start = text.lastIndexOf(open);
  if (start < 0) return undefined;
  const end = text.indexOf(close, start + open.length);
  return text.slice(start + open.length, end < 0 ? undefined : end).trim();
}
