// JUnit XML test reports (artifacts:reports:junit) read as GitLab reads them
// (Gitlab::Ci::Parsers::Test::Junit over Hash.from_xml): one top-level <testsuites>, any nesting
// of <testsuite>, each <testcase> is failed (<failure>), error (<error>), skipped (<skipped>) or
// a success; duplicates (same suite, class and name with the same status) count once.
//
// The XML comes from a job, so the parser is small and bounded: no DTDs or external entities
// (a DOCTYPE is skipped, only the five predefined and numeric character references exist),
// limited nesting, linear time. Several documents may follow each other (the runner uploads one
// gzip member per file, and they decompress as one stream).

export type TestStatus = 'success' | 'failed' | 'skipped' | 'error';
/** GitLab's TestCase::STATUS_TYPES order, which its sorted test suites follow. */
export const STATUS_ORDER: TestStatus[] = ['error', 'failed', 'success', 'skipped'];
const MAX_DEPTH = 256;

export interface TestCase {
  status: TestStatus;
  suiteName: string | null;
  name: string | null;
  classname: string | null;
  file: string | null;
  executionTime: number;
  /** The failure/error/skipped element's text, its attributes when it has no text, or null. */
  systemOutput: unknown;
}

/** One suite of a pipeline's test report (the JUnit reports of the jobs that share a name). */
export interface TestSuiteReport {
  name: string;
  totalTime: number;
  counts: Record<TestStatus, number>;
  /** Sorted as GitLab sorts them: by status (error, failed, success, skipped), then slowest first. */
  testCases: TestCase[];
  suiteError: string | null;
  buildIds: number[];
}

/** Times as GitLab rounds them (two decimals). */
export function round2(n: number): number {
  return Math.round(n * 100) / 100;
}

export class XmlError extends Error {}

interface XmlElement {
  name: string;
  attrs: Record<string, string>;
  children: XmlElement[];
  text: string;
}

const PREDEFINED: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

function decodeEntities(s: string, line: () => number): string {
  if (!s.includes('&')) return s;
  return s.replace(/&([^;&\s]{0,32});/g, (_m, ref: string) => {
    if (ref.startsWith('#x') || ref.startsWith('#X')) {
      const code = Number.parseInt(ref.slice(2), 16);
      if (Number.isFinite(code) && code > 0 && code <= 0x10ffff) return String.fromCodePoint(code);
    } else if (ref.startsWith('#')) {
      const code = Number(ref.slice(1));
      if (Number.isInteger(code) && code > 0 && code <= 0x10ffff) return String.fromCodePoint(code);
    } else if (Object.hasOwn(PREDEFINED, ref)) return PREDEFINED[ref];
    throw new XmlError(`${line()}:0: FATAL: Entity '${ref}' not defined`);
  });
}

/** The root elements of one or more XML documents following each other. */
export function parseXmlDocuments(xml: string): XmlElement[] {
  const roots: XmlElement[] = [];
  const stack: XmlElement[] = [];
  let i = 0;
  const lineAt = (pos: number) => {
    let n = 1;
    for (let k = xml.indexOf('\n'); k !== -1 && k < pos; k = xml.indexOf('\n', k + 1)) n++;
    return n;
  };
  const fail = (message: string, pos = i): never => {
    throw new XmlError(`${lineAt(pos)}:0: FATAL: ${message}`);
  };
  const skipTo = (marker: string, what: string) => {
    const end = xml.indexOf(marker, i);
    if (end === -1) fail(`${what} not terminated`);
    i = end + marker.length;
  };
  const addText = (text: string) => {
    if (stack.length) stack[stack.length - 1].text += text;
    else if (text.trim() !== '') fail('Start tag expected, \'<\' not found');
  };
  while (i < xml.length) {
    const lt = xml.indexOf('<', i);
    if (lt === -1) {
      addText(decodeEntities(xml.slice(i), () => lineAt(i)));
      break;
    }
    if (lt > i) addText(decodeEntities(xml.slice(i, lt), () => lineAt(i)));
    i = lt;
    if (xml.startsWith('<?', i)) skipTo('?>', 'processing instruction');
    else if (xml.startsWith('<!--', i)) skipTo('-->', 'Comment');
    else if (xml.startsWith('<![CDATA[', i)) {
      const start = i + 9;
      skipTo(']]>', 'CData section');
      if (!stack.length) fail('Start tag expected');
      stack[stack.length - 1].text += xml.slice(start, i - 3);
    } else if (xml.startsWith('<!', i)) {
      // <!DOCTYPE ...> with an optional internal subset: skipped, its entities are never defined.
      let depth = 0;
      let k = i + 2;
      for (; k < xml.length; k++) {
        const c = xml[k];
        if (c === '[') depth++;
        else if (c === ']') depth--;
        else if (c === '>' && depth <= 0) break;
      }
      if (k >= xml.length) fail('DOCTYPE not terminated');
      i = k + 1;
    } else if (xml.startsWith('</', i)) {
      const m = /^<\/([^\s>]+)\s*>/.exec(xml.slice(i, i + 512));
      if (!m) fail('expected \'>\'');
      const open = stack.pop();
      if (!open) fail(`Unexpected end tag : ${m![1]}`);
      if (open!.name !== m![1]) fail(`Opening and ending tag mismatch: ${open!.name} and ${m![1]}`);
      i += m![0].length;
    } else {
      const nameMatch = /^<([A-Za-z_:][-A-Za-z0-9_:.]*)/.exec(xml.slice(i, i + 512));
      if (!nameMatch) fail('StartTag: invalid element name');
      const el: XmlElement = { name: nameMatch![1], attrs: {}, children: [], text: '' };
      i += nameMatch![0].length;
      const attr = /\s*([A-Za-z_:][-A-Za-z0-9_:.]*)\s*=\s*("([^"]*)"|'([^']*)')|\s*(\/?>)/y;
      for (;;) {
        attr.lastIndex = i;
        const a = attr.exec(xml);
        if (!a) fail(`Couldn't find end of Start Tag ${el.name}`);
        i = attr.lastIndex;
        if (a![5]) {
          if (stack.length >= MAX_DEPTH) fail(`Excessive depth in document: ${MAX_DEPTH}`);
          if (stack.length) stack[stack.length - 1].children.push(el);
          else roots.push(el);
          if (a![5] === '>') stack.push(el);
          break;
        }
        const raw = a![3] ?? a![4] ?? '';
        if (raw.includes('<')) fail(`Unescaped '<' not allowed in attributes values`);
        el.attrs[a![1]] = decodeEntities(raw, () => lineAt(i));
      }
    }
  }
  if (stack.length) fail(`Premature end of data in tag ${stack[stack.length - 1].name}`, xml.length);
  if (!roots.length) fail('Document is empty', 0);
  return roots;
}

/** What Hash.from_xml makes of an element such as <failure>: its text, else its attributes, else nil. */
function elementValue(el: XmlElement): unknown {
  if (el.text.trim() !== '') return el.text;
  if (Object.keys(el.attrs).length) return { ...el.attrs };
  return null;
}

function caseOf(tc: XmlElement, suiteName: string | null): TestCase {
  const pick = (name: string) => tc.children.filter((c) => c.name === name);
  const valueOf = (els: XmlElement[]) => (els.length === 1 ? elementValue(els[0]) : els.map(elementValue));
  let status: TestStatus = 'success';
  let systemOutput: unknown = null;
  for (const [tag, s] of [['failure', 'failed'], ['error', 'error'], ['skipped', 'skipped']] as const) {
    const found = pick(tag);
    if (found.length) {
      status = s;
      systemOutput = valueOf(found);
      break;
    }
  }
  const time = Number.parseFloat(tc.attrs.time ?? '');
  return {
    status,
    suiteName,
    name: tc.attrs.name ?? null,
    classname: tc.attrs.classname ?? null,
    file: tc.attrs.file ?? null,
    executionTime: Number.isFinite(time) ? time : 0,
    systemOutput,
  };
}

/** The test cases of one or more JUnit XML documents, in document order. Throws XmlError. */
export function parseJunit(xml: string): TestCase[] {
  const cases: TestCase[] = [];
  const visit = (suite: XmlElement) => {
    const name = suite.attrs.name ?? null;
    for (const child of suite.children) if (child.name === 'testcase') cases.push(caseOf(child, name));
    // nested <testsuite> elements (PHPUnit) are followed; nested <testsuites> are not
    for (const child of suite.children) if (child.name === 'testsuite') visit(child);
  };
  for (const root of parseXmlDocuments(xml)) {
    if (root.name === 'testsuites' || root.name === 'testsuite') visit(root);
  }
  return cases;
}
