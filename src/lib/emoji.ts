import { createRequire } from 'node:module';

/**
 * Emoji names an award may use. GitLab validates award names against its emoji index (gemoji
 * names, and the gemojione ones its older index had). Cairn takes the same two vocabularies from
 * the `emojibase-data` package, kept up to date with each Unicode release: its GitHub shortcodes
 * (gemoji) and its JoyPixels shortcodes (the emojione/gemojione names, such as slight_smile and
 * the skin tones thumbsup_tone1...). Loaded once, on first use.
 */
let names: Set<string> | undefined;

function loadNames(): Set<string> {
  const require = createRequire(import.meta.url);
  const out = new Set<string>();
  for (const preset of ['github', 'joypixels']) {
    const table = require(`emojibase-data/en/shortcodes/${preset}.json`) as Record<string, string | string[]>;
    for (const value of Object.values(table)) for (const name of ([] as string[]).concat(value)) out.add(name);
  }
  return out;
}

/** Aliases stored under GitLab's canonical name, so that votes count the same whichever was sent. */
const CANONICAL: Record<string, string> = { '+1': 'thumbsup', '-1': 'thumbsdown' };

/** The name an award is stored under (GitLab's normalize_emoji_name), or null when it names no known emoji. */
export function awardEmojiName(raw: string): string | null {
  names ??= loadNames();
  const name = CANONICAL[raw] ?? raw;
  return names.has(name) ? name : null;
}
