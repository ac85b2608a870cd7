"""After the build: every page in _toc.yml rendered to HTML with content, every chapter shows figures, the
bibliography rendered, and no printed line of an executed notebook passes the page's width (tools/output_widths.py,
read from jupyter-book's cache beside the HTML)."""
import pathlib
import sys

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tools"))
from output_widths import WIDTH, cached_notebooks, overlong_lines  # noqa: E402  (tools/ is not a package)

# Code cells (counted among the code cells, as jupyter-cache stores a notebook) whose long printed lines are known and
# still to be shortened, measured at tiny: reported, not failed. Code cell 0 is the environment report of every
# notebook (gma_teach.env_report). A long line in any other cell fails the check; a listed cell whose lines now fit
# must leave the list.
KNOWN_OVERLONG = {
    "01_answers.ipynb": [0, 2, 4],
    "01_quadratic_wall.ipynb": [0, 8, 9, 12],
    "02_answers.ipynb": [0],
    "02_gaussian_mixtures.ipynb": [0, 9, 15],
    "03_answers.ipynb": [0, 3, 4],
    "03_attention_through_responsibilities.ipynb": [0, 5],
    "04_answers.ipynb": [0, 2, 3, 4],
    "04_associative_reordering.ipynb": [0, 1],
    "05_answers.ipynb": [0, 2],
    "05_trainable_layer.ipynb": [0, 5, 8, 13, 15, 19],
    "06_answers.ipynb": [0, 3, 4],
    "06_causal_prefix_sums.ipynb": [0, 1],
    "07_answers.ipynb": [0, 2, 3, 5, 6],
    "07_triton_kernel.ipynb": [0, 1, 12],
    "07b_gma_kernels.ipynb": [0, 1, 6, 7, 9, 13, 16],
    "08_answers.ipynb": [0, 2, 3, 4],
    "08_systems_profiling.ipynb": [0, 1, 10, 13, 14],
    "09_answers.ipynb": [0, 2, 3],
    "09_long_range_arena.ipynb": [0],
    "10_answers.ipynb": [0, 2, 3],
    "10_language_modelling.ipynb": [0],
    "11_answers.ipynb": [0],
    "11_reading_the_routing.ipynb": [0, 12, 17, 21, 31],
    "12_answers.ipynb": [0],
    "12_what_the_memory_holds.ipynb": [0],
    "part_iv_findings.ipynb": [0],
    "statistics_primer.ipynb": [0],
}

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
too_wide, known, still_long = [], [], set()
for uri, notebook in sorted(executed.items()):
    name = pathlib.Path(uri).name
    for index, line in overlong_lines(notebook):
        listed = index in KNOWN_OVERLONG.get(name, ())
        if listed:
            still_long.add((name, index))
        (known if listed else too_wide).append(f"{name} code cell {index} ({len(line)} chars): {line}")
for line in known:
    print(f"known long line (to fix): {line}")
fitted = sorted(f"{name} code cell {index}" for name, cells in KNOWN_OVERLONG.items() for index in cells
                if (name, index) not in still_long and any(pathlib.Path(uri).name == name for uri in executed))
if fitted:
    sys.exit(f"these cells now fit the width: remove them from KNOWN_OVERLONG in .ci/check_book.py: {fitted}")
if too_wide:
    sys.exit(f"printed lines wider than {WIDTH} characters:\n" + "\n".join(too_wide))
print(f"book check: {len(pages)} pages rendered, figures in all {len(chapters)} chapters; bibliography entries "
      f"on {len(bibliography)} page(s); printed lines of {len(executed)} executed notebooks fit {WIDTH} characters "
      f"but the {len(known)} known long lines listed above")
