// locateField finds where a field the API names ("teams[1].workers[0].agent_id")
// is written in a JSON text, so that an error can be shown next to it.
// It answers the deepest part of the path that the text has, with its
// offsets and 1-based line, or null when the text is not JSON.

export function locateField(text, field) {
  let spans;
  try {
    spans = scan(text);
  } catch {
    return null;
  }
  let path = field || '';
  for (;;) {
    const s = spans.get(path);
    if (s) return { path, start: s.start, end: s.end, line: lineOf(text, s.start) };
    if (!path) return null;
    path = parent(path);
  }
}

// parent drops a path's last step: "a.b[2]" → "a.b", "a.b" → "a", "a" → "".
function parent(path) {
  const i = Math.max(path.lastIndexOf('.'), path.lastIndexOf('['));
  return i <= 0 ? '' : path.slice(0, i);
}

export function lineOf(text, offset) {
  let line = 1;
  for (let i = 0; i < offset && i < text.length; i++) if (text[i] === '\n') line++;
  return line;
}

// scan parses JSON and maps every path to the span of its key (object
// members) or of its value (array elements and the root).
function scan(text) {
  const spans = new Map();
  let i = 0;
  const ws = () => { while (i < text.length && ' \t\r\n'.includes(text[i])) i++; };
  const fail = () => { throw new SyntaxError('bad JSON at ' + i); };
  const str = () => {
    if (text[i] !== '"') fail();
    const start = i++;
    while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    if (i >= text.length) fail();
    i++;
    return JSON.parse(text.slice(start, i));
  };
  const value = (path) => {
    ws();
    const start = i;
    const c = text[i];
    if (c === '{') {
      i++;
      ws();
      if (text[i] === '}') { i++; } else {
        for (;;) {
          ws();
          const kStart = i;
          const key = str();
          const p = path ? path + '.' + key : key;
          spans.set(p, { start: kStart, end: i });
          ws();
          if (text[i++] !== ':') fail();
          value(p);
          ws();
          if (text[i] === ',') { i++; continue; }
          if (text[i] === '}') { i++; break; }
          fail();
        }
      }
    } else if (c === '[') {
      i++;
      ws();
      if (text[i] === ']') { i++; } else {
        for (let n = 0; ; n++) {
          ws();
          const vStart = i;
          value(path + '[' + n + ']');
          if (!spans.has(path + '[' + n + ']')) spans.set(path + '[' + n + ']', { start: vStart, end: i });
          ws();
          if (text[i] === ',') { i++; continue; }
          if (text[i] === ']') { i++; break; }
          fail();
        }
      }
    } else if (c === '"') {
      str();
    } else {
      const m = /^(-?\d+(\.\d+)?([eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i, i + 64));
      if (!m) fail();
      i += m[0].length;
    }
    if (!path && !spans.has('')) spans.set('', { start, end: i });
  };
  value('');
  return spans;
}
