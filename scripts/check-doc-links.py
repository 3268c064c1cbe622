#!/usr/bin/env python3
"""Checks that every link in the repository's Markdown to a local file or
anchor resolves: README.md, ARCHITECTURE.md, BENCHMARKS.md, docs/*.md and
every other tracked-looking *.md outside build output. Links to other
sites (http:, https:, mailto:) are not fetched. Anchors follow GitHub's
rule: a heading's text, lower-cased, without punctuation, spaces as '-',
a repeated heading suffixed -1, -2, ...

Usage: scripts/check-doc-links.py [FILE.md ...]   (default: the whole tree)
Prints one line per broken link and exits 1 if there is any.
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
SKIP_DIRS = {'.git', 'target', 'node_modules', 'dist', 'artifacts', 'out'}

FENCE = re.compile(r'^\s{0,3}(```|~~~)')
HEADING = re.compile(r'^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$')
# [text](target "title") — text may hold one level of brackets; target has no spaces.
INLINE = re.compile(r'\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
REFDEF = re.compile(r'^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+"[^"]*")?\s*$')
HTML_ID = re.compile(r'<a\s+(?:name|id)="([^"]+)"')
CODE_SPAN = re.compile(r'(`+)(.+?)\1')


def markdown_files():
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for f in sorted(filenames):
            if f.endswith('.md'):
                yield os.path.join(dirpath, f)


def lines_outside_code(text):
    """(line number, line) for every line outside fenced code blocks."""
    fence = None
    for i, line in enumerate(text.split('\n'), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield i, line


def slug(heading):
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', text)  # links: their text
    text = re.sub(r'<[^>]+>', '', text)  # inline HTML
    text = text.replace('*', '')
    text = text.strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen = {}
        out = set()
        with open(path, encoding='utf-8') as f:
            text = f.read()
        for _, line in lines_outside_code(text):
            m = HEADING.match(line)
            if m:
                s = slug(m.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                out.add(s if n == 0 else f'{s}-{n}')
            out.update(HTML_ID.findall(line))
        _anchors[path] = out
    return _anchors[path]


def check(path):
    errors = []
    with open(path, encoding='utf-8') as f:
        text = f.read()
    rel = os.path.relpath(path, ROOT)
    for lineno, line in lines_outside_code(text):
        bare = CODE_SPAN.sub('', line)
        targets = INLINE.findall(bare)
        m = REFDEF.match(bare)
        if m:
            targets.append(m.group(1))
        for target in targets:
            if re.match(r'^[a-zA-Z][a-zA-Z0-9+.-]*:', target):
                continue  # another site or scheme
            file_part, _, anchor = target.partition('#')
            dest = path if not file_part else os.path.normpath(os.path.join(os.path.dirname(path), file_part))
            if not dest.startswith(ROOT):
                errors.append(f'{rel}:{lineno}: {target}: points outside the repository')
                continue
            if not os.path.exists(dest):
                errors.append(f'{rel}:{lineno}: {target}: no such file')
                continue
            if anchor:
                if not dest.endswith('.md') or os.path.isdir(dest):
                    continue  # line anchors into code are GitHub's, not checked
                if anchor not in anchors(dest):
                    errors.append(f'{rel}:{lineno}: {target}: no heading with that anchor in {os.path.relpath(dest, ROOT)}')
    return errors


def main():
    files = [os.path.abspath(a) for a in sys.argv[1:]] or list(markdown_files())
    errors = [e for f in files for e in check(f)]
    for e in errors:
        print(e)
    if errors:
        print(f'{len(errors)} broken link(s) in {len(files)} Markdown file(s)', file=sys.stderr)
        return 1
    print(f'doc links: {len(files)} Markdown files, every local link resolves')
    return 0


if __name__ == '__main__':
    sys.exit(main())
