"""After the build: every page in _toc.yml rendered to HTML with content, every chapter shows figures, the
bibliography rendered, and no printed line of an executed notebook passes the page's width (tools/output_widths.py,
read from jupyter-book's cache beside the HTML)."""
import pathlib
import sys

import yaml

from gma_teach.measure import PAGE_WIDTH

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tools"))
from output_widths import cached_notebooks, overlong_lines  # noqa: E402  (tools/ is not a package)

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
missing = [page for page in pages if not (html / f"{pathlib.Path(page).with_suffix('')}.html").exists()
           or (html / f"{pathlib.Path(page).with_suffix('')}.html").stat().st_size < 2000]
if missing:
    sys.exit(f"pages not rendered: {missing}")
chapters = [page for page in pages  # the chapters themselves, directly under book/ (answers pages need no figure)
            if pathlib.Path(page).parent == pathlib.Path("book") and pathlib.Path(page).name[:2].isdigit()]
without_figures = [page for page in chapters
                   if "_images/" not in (html / f"{pathlib.Path(page).with_suffix('')}.html").read_text()]
if without_figures:
    sys.exit(f"chapters without a rendered figure (is MPLBACKEND overriding the notebooks' inline backend?): "
             f"{without_figures}")
bibliography = [p for p in html.rglob("*.html") if "docutils citation" in p.read_text(errors="ignore")
                or 'class="citation' in p.read_text(errors="ignore")]
if not bibliography:
    sys.exit("no page carries a rendered bibliography entry")
cache = html.parent / ".jupyter_cache"
if not cache.is_dir():
    sys.exit(f"no jupyter-cache folder at {cache}: build with execute_notebooks: cache (tools/build_book.py)")
executed = cached_notebooks(cache)
if not executed:
    sys.exit(f"the jupyter-cache folder {cache} holds no executed notebook")
too_wide = [f"{pathlib.Path(uri).name} code cell {index} ({len(line)} chars): {line}"
            for uri, notebook in sorted(executed.items()) for index, line in overlong_lines(notebook)]
if too_wide:
    sys.exit(f"printed lines wider than {PAGE_WIDTH} characters:\n" + "\n".join(too_wide))
print(f"book check: {len(pages)} pages rendered, figures in all {len(chapters)} chapters; bibliography entries "
      f"on {len(bibliography)} page(s); every printed line of {len(executed)} executed notebooks fits {PAGE_WIDTH} "
      f"characters")
