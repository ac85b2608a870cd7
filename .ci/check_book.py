"""After the build: every chapter in _toc.yml rendered to HTML with content, and the bibliography rendered."""
import pathlib
import sys

import yaml

html = pathlib.Path(sys.argv[1])
toc = yaml.safe_load(pathlib.Path("_toc.yml").read_text())


def files(node):
    if isinstance(node, dict):
        if "file" in node:
            yield node["file"]
        for value in node.values():
            yield from files(value)
    elif isinstance(node, list):
        for item in node:
            yield from files(item)


pages = [toc["root"], *files({k: v for k, v in toc.items() if k != "root"})]
missing = []
for page in pages:
    stem = pathlib.Path(page).with_suffix("")
    target = html / f"{stem}.html"
    if not target.exists() or target.stat().st_size < 2000:
        missing.append(str(target))
bibliography = [p for p in html.rglob("*.html") if 'class="citation' in p.read_text(errors="ignore")
                or "docutils citation" in p.read_text(errors="ignore")]
if missing:
    sys.exit(f"pages not rendered: {missing}")
if not bibliography:
    sys.exit("no page carries a rendered bibliography entry")
print(f"book check: {len(pages)} pages rendered; bibliography entries on {len(bibliography)} page(s)")
