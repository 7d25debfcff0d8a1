"""kernel_probe on real kernels: the library probe imports nothing, the data preview reads
messy files and keeps to its budget, in a plain kernel and in the sandbox."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from kernel_agent.executors.kernel import KernelSession
from kernel_agent.kernel_state.kernel_probe import (
    DATA_STACK,
    LIBRARIES,
    LIBRARY_PROBE_CODE,
    OTHER_LIBRARIES,
    data_preview_code,
    data_preview_expression,
    describe_libraries,
    library_probe_expression,
    parse_library_probe,
    parse_text_expression,
)
from kernel_agent.kernel_state.preview_facts import split_facts
from kernel_agent.sandbox import bwrap_problem, make_launcher
from kernel_agent.settings import Settings

pytestmark = pytest.mark.timeout(180)

MESSY_CSV = (
    "id,row m/z,label,value\n"
    "1,101.5,alpha,12\n"
    "2,,beta,n/a\n"
    "3,99.25,,abc\n"
    "4,100.0,delta,7.5\n"
    "5,,epsilon,3\n"
)


def probe(session, expression: str = LIBRARY_PROBE_CODE) -> dict[str, str]:
    result = session.execute("", timeout=60, user_expressions={"libs": expression})
    assert result.ok, result.error
    return parse_library_probe(result.user_expressions["libs"])


def stdout(result) -> str:
    return "".join(o.get("text", "") for o in result.outputs if o.get("name") == "stdout")


def preview(session, *args, **kwargs) -> str:
    result = session.execute(data_preview_code(*args, **kwargs), timeout=120)
    assert result.ok, result.error
    return stdout(result)


def test_library_probe_finds_the_stack_with_versions_and_imports_nothing(fresh_kernel):
    k = fresh_kernel()
    found = probe(k)
    for module, dist in DATA_STACK.items():
        assert found.get(module) == importlib.metadata.version(dist), module
    for module in OTHER_LIBRARIES:
        assert (module in found) == (importlib.util.find_spec(module) is not None), module
    check = k.execute(
        f"import sys\nprint(sorted(m for m in {list(LIBRARIES)!r} if m in sys.modules))\n"
        "print(sorted(n for n in ('m', 'd', 'x') if n in globals()))",
        timeout=30,
    )
    assert check.ok and stdout(check) == "[]\n[]\n", check.outputs


def test_library_probe_reports_loose_modules_without_a_version(fresh_kernel, tmp_path):
    (tmp_path / "kprobe_loose.py").write_text("X = 1\n")
    k = fresh_kernel(cwd=tmp_path)
    assert k.execute(f"import sys; sys.path.insert(0, {str(tmp_path)!r})", timeout=30).ok
    wanted = {"kprobe_loose": "kprobe-loose", "no_such_module_kprobe": "nope", "numpy": "numpy"}
    found = probe(k, library_probe_expression(wanted))
    assert found == {"kprobe_loose": "", "numpy": importlib.metadata.version("numpy")}
    line = describe_libraries(found, wanted)
    assert line == (
        f"Importable in the kernel: kprobe_loose, numpy {found['numpy']}; "
        "not installed: no_such_module_kprobe."
    )


def test_parse_and_describe_edge_cases():
    assert parse_library_probe(None) == {}
    assert parse_library_probe({"status": "error", "ename": "NameError"}) == {}
    assert parse_library_probe({"status": "ok", "data": {"text/plain": "not a literal"}}) == {}
    assert parse_library_probe({"status": "ok", "data": {"text/plain": "'[1, 2]'"}}) == {}
    ok = {"status": "ok", "data": {"text/plain": repr('{"pandas": "2.2.0", "foo": null}')}}
    assert parse_library_probe(ok) == {"pandas": "2.2.0", "foo": ""}
    line = describe_libraries({"pandas": "2.2.0", "scipy": "1.13.0", "mylib": "0.1"})
    assert "\n" not in line and len(line) < 400
    assert line.startswith("Importable in the kernel: pandas 2.2.0, scipy 1.13.0, mylib 0.1;")
    assert "not installed: numpy, sklearn" in line and "polars" in line
    assert describe_libraries({}, {"a": "a"}) == (
        "Importable in the kernel: none of the usual libraries; not installed: a."
    )


def write_data(folder: Path) -> None:
    (folder / "messy.csv").write_text(MESSY_CSV)
    frame = pd.DataFrame({"city": ["Oslo", "Lima", None], "pop": [0.7, 10.1, 2.5]})
    frame.to_excel(folder / "cities.xlsx", index=False)
    frame.to_parquet(folder / "cities.parquet")
    (folder / "records.json").write_text('[{"a": 1, "b": "x"}, {"a": 2, "b": null}]')
    (folder / "semi.csv").write_text("x;y\n1;2\n3;4\n")
    (folder / "broken.json").write_text("{not json")
    (folder / "notes.txt").write_text("free text\n" * 50)


def test_preview_of_messy_files_in_the_kernels_cwd(fresh_kernel, tmp_path):
    k = fresh_kernel(cwd=tmp_path)
    write_data(Path(k.kernel_cwd))
    out = preview(k, budget_chars=6000)
    assert out.splitlines()[0] == "broken.json (9 B)"
    messy = out[out.index("messy.csv (") : out.index("notes.txt (")]
    assert "5 rows x 4 columns" in messy
    assert "'row m/z' float64" in messy and "'id' int64" in messy
    assert "missing values: 'row m/z' 2, 'label' 1, 'value' 1" in messy
    assert "101.5" in messy and "alpha" in messy and "delta" not in messy  # three rows
    assert "'value' object" in messy or "'value' str" in messy  # mixed numbers and words
    assert "cities.xlsx (" in out and "cities.parquet (" in out
    assert out.count("3 rows x 2 columns") == 2 and "'pop' float64" in out
    assert "records.json (" in out and "2 rows x 2 columns" in out
    assert "separator ';'" in out and "2 rows x 2 columns (separator ';')" in out
    assert "notes.txt (500 B)" in out and "free text" not in out
    assert "broken.json (9 B)\n  not previewed: ValueError" in out
    assert "[preview cut" not in out
    clean = k.execute("print(sorted(n for n in globals() if not n.startswith('_')))", timeout=30)
    assert stdout(clean) == "['In', 'Out', 'exit', 'get_ipython', 'open', 'quit']\n"


def test_preview_keeps_to_its_budget_and_names_what_it_cut(kernel, kernel_workdir):
    folder = kernel_workdir / "budget"
    folder.mkdir(exist_ok=True)
    wide = pd.DataFrame({f"column_{i}": range(40) for i in range(60)})
    wide.to_csv(folder / "a_wide.csv", index=False)
    (folder / "b_messy.csv").write_text(MESSY_CSV)
    (folder / "c_notes.txt").write_text("x")
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    full = preview(kernel, budget_chars=100_000)
    assert len(full) > 2000 and "[preview cut" not in full
    assert "'column_29' int64, ... 30 more" in full
    cut = preview(kernel, budget_chars=700)
    assert len(cut.rstrip("\n")) <= 700
    assert cut.startswith("a_wide.csv (") and "40 rows x 60 columns" in cut
    assert "'column_0' int64, 'column_1' int64" in cut
    assert cut.rstrip().endswith(
        " ...\n[preview cut at 700 characters; not shown: "
        f"b_messy.csv ({len(MESSY_CSV)} B), c_notes.txt (1 B)]"
    )
    (folder / "0_readme.txt").write_text("first by name, last in the preview")
    ordered = preview(kernel, budget_chars=100_000)
    assert (
        ordered.index("a_wide.csv (")
        < ordered.index("b_messy.csv (")
        < ordered.index("0_readme.txt (")
    )
    (folder / "0_readme.txt").unlink()
    only = preview(kernel, ["b_messy.csv"], 2000)
    assert only.startswith("b_messy.csv (") and "a_wide" not in only
    gone = preview(kernel, ["missing.csv"], 200)
    assert gone == "missing.csv: cannot read (FileNotFoundError)\n"
    tiny = preview(kernel, budget_chars=60)
    assert len(tiny.rstrip("\n")) <= 60 and tiny.startswith("a_wide.csv (")


def test_preview_as_an_expression_takes_no_execution_count_and_leaves_no_names(
    kernel, kernel_workdir
):
    folder = kernel_workdir / "expr"
    folder.mkdir(exist_ok=True)
    (folder / "messy.csv").write_text(MESSY_CSV)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    names = "sorted(n for n in dir() if not n.startswith('_'))"
    before = kernel.execute(names, timeout=30)
    result = kernel.execute(
        "", timeout=60, user_expressions={"p": data_preview_expression(budget_chars=2000)}
    )
    text = parse_text_expression(result.user_expressions["p"])
    assert text is not None and text == preview(kernel, budget_chars=2000).rstrip("\n")
    assert "5 rows x 4 columns" in text and result.outputs == []
    after = kernel.execute(names, timeout=30)
    assert after.execution_count == before.execution_count + 2  # the preview cell(s) in between
    assert after.outputs[0]["data"]["text/plain"] == before.outputs[0]["data"]["text/plain"]


def test_preview_of_a_wide_table_shows_rows_of_the_columns_the_task_names(kernel, kernel_workdir):
    folder = kernel_workdir / "focus"
    folder.mkdir(exist_ok=True)
    header = ",".join(f"col{i}" for i in range(10)) + ",unemp rate"
    rows = "\n".join(",".join(str(r * 100 + i) for i in range(11)) for r in range(4))
    (folder / "wide.csv").write_text(header + "\n" + rows + "\n")
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok

    def shown(task: str) -> str:
        expression = data_preview_expression(budget_chars=3000, focus=task)
        result = kernel.execute("", timeout=60, user_expressions={"p": expression})
        text = parse_text_expression(result.user_expressions["p"])
        assert text is not None and "'col9' int64" in text  # every column is still listed
        return text

    focused = shown("What is the mean of col3 and of 'unemp rate' by col1?")
    assert "first rows of the columns the task names" in focused
    table = focused.split("task names:")[1]
    assert "col3" in table and "unemp rate" in table and "col1" in table
    assert "col2" not in table and "col30" not in table
    everything = shown("What is the mean of everything?")
    assert "task names" not in everything and "col2" in everything.split("missing values")[1]


def test_preview_lists_few_distinct_values_and_a_wide_tables_late_label_column(
    kernel, kernel_workdir
):
    folder = kernel_workdir / "labels"
    folder.mkdir(exist_ok=True)
    n = 40
    frame = pd.DataFrame({f"f{i}": [i + r / 7 for r in range(n)] for i in range(32)})
    frame["target"] = [r % 2 for r in range(n)]  # the 33rd column: past the 30 listed
    frame["sex"] = ["female" if r % 3 else "male" for r in range(n)]
    frame["ident"] = [f"p{r}" for r in range(n)]  # many values: not listed as few
    frame["long"] = ["x" * 30 if r % 2 else "y" for r in range(n)]  # a value over 24 chars
    frame.to_csv(folder / "wide.csv", index=False)
    small = pd.DataFrame({"grade": list("babababababa"), "passed": [True, False] * 6})
    small.to_csv(folder / "small.csv", index=False)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    out = preview(kernel, budget_chars=20_000)
    wide = out[out.index("wide.csv (") :]
    columns = next(line for line in wide.splitlines() if line.startswith("  columns: "))
    assert "'f29' float64, 'target' int64, 'sex' " in columns and "'long' " in columns
    assert "'f30'" not in columns and "'ident'" not in columns  # many values: left out
    assert columns.endswith(", ... 3 more")
    assert "few distinct values: 'sex' 'female', 'male'\n" in wide  # integer codes: not listed
    # values sort as values; a table with fewer rows than twice the limit lists none
    assert "few distinct values: 'grade' 'a', 'b'; 'passed' False, True" in out
    tiny = folder / "tiny"
    tiny.mkdir()
    (tiny / "t.csv").write_text("a,b\n1,x\n2,y\n1,x\n")
    assert kernel.execute(f"os.chdir({str(tiny)!r})", timeout=30).ok
    assert "few distinct" not in preview(kernel, budget_chars=2000)


def test_preview_in_the_sandbox_reads_the_linked_input_file(tmp_path):
    problem, _, _ = bwrap_problem()
    if problem is not None:
        pytest.skip(f"no bwrap sandbox here: {problem}")
    view, inputs = tmp_path / "view", tmp_path / "inputs"
    view.mkdir()
    inputs.mkdir()
    (inputs / "messy.csv").write_text(MESSY_CSV)
    files = (inputs / "messy.csv",)
    settings = Settings(cwd=view, home=tmp_path / "h", sandbox="bwrap", files=files)
    with KernelSession(cwd=view, launcher=make_launcher(settings, view)) as k:
        assert Path(k.kernel_cwd) != view
        out = preview(k, budget_chars=2000)
        assert out.startswith("messy.csv (") and "5 rows x 4 columns" in out
        assert "missing values: 'row m/z' 2, 'label' 1, 'value' 1" in out
        found = probe(k)
    assert set(DATA_STACK) <= set(found)


def _fixes(out: str) -> list[str]:
    """The code the preview tells the model to run: each ``read it with`` and ``! ...: fix``."""
    codes = [
        line.split("read it with: ", 1)[1] for line in out.splitlines() if "read it with: " in line
    ]
    for line in out.splitlines():
        if line.startswith("  ! ") and ": df[" in line:
            codes.append("df[" + line.split(": df[", 1)[1])
    return codes


@pytest.mark.parametrize(
    ("name", "raw", "encoding"),
    [
        ("orders.csv", "id\tprice\tname\n1\t2.5\tab\n2\t3.5\tcd\n3\t4.0\tef\n", "utf-8"),
        ("u.user", "id|price|name\n1|2.5|ab\n2|3.5|cd\n3|4.0|ef\n", "utf-8"),
        ("prices.tsv", "id\tprice\tname\n1\t2.5\tab\n2\t3.5\tcd\n3\t4.0\tef\n", "utf-8"),
        ("eu.csv", "id;price;name\n1;2,5;Île\n2;3,5;Sète\n3;4,0;Nîmes\n", "latin-1"),
        ("semi.txt", "id;price;name\n1;2.5;ab\n2;3.5;cd\n3;4.0;ef\n", "utf-8"),
        # fields lined up by runs of blanks, as pandas-exercises' wind.data (2026-12-07)
        ("wind.data", "id  price name\n 1   2.5  ab\n 2   3.5  cd\n10   4.0  ef\n", "utf-8"),
    ],
)
def test_preview_names_the_read_call_that_works_for_each_separator_and_encoding(
    kernel, kernel_workdir, name, raw, encoding
):
    folder = kernel_workdir / f"sep-{name}"
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(raw.encode(encoding))
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    out = preview(kernel, budget_chars=3000)
    assert "3 rows x 3 columns" in out
    codes = _fixes(out)
    assert len(codes) == 1 and codes[0].startswith("df = pd.read_csv(")
    check = kernel.execute(
        "import pandas as pd\n" + codes[0] + "\nprint(list(df.columns), df['price'].sum())",
        timeout=30,
    )
    assert check.ok and stdout(check) == "['id', 'price', 'name'] 10.0\n", (out, check.outputs)


def test_identifiers_with_a_letter_are_codes_not_numbers_with_a_few_bad(kernel, kernel_workdir):
    """Online Retail: 'C536379' is a cancelled invoice; read as a number it is lost."""
    folder = kernel_workdir / "retail"
    folder.mkdir(exist_ok=True)
    n = 60
    frame = pd.DataFrame(
        {
            "InvoiceNo": [f"C{536400 + i}" if i % 9 == 0 else str(536300 + i) for i in range(n)],
            "StockCode": [
                f"{85000 + i}{'ABGF'[i % 4]}" if i % 7 == 0 else str(22700 + i) for i in range(n)
            ],
            "streams": [str(1_000_000 + i) for i in range(n)],
            "Quantity": list(range(n)),
            "weight": [f"{50 + i}kg" if i % 4 == 0 else str(50 + i) for i in range(n)],
            "installs": [f"{100 + i}K" if i % 4 == 0 else str(100 + i) for i in range(n)],
        }
    )
    frame.loc[7, "streams"] = "BPM110KeyAModeMajor"  # one corrupt row is no code
    frame.loc[8, "streams"] = "12x"  # nor a value of fewer digits than the numbers
    frame.to_csv(folder / "retail.csv", index=False)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    out = preview(kernel, budget_chars=4000)
    assert "'streams' holds numbers stored as text (2 not numbers" in out, out
    assert "'InvoiceNo' holds" not in out and "'StockCode' holds" not in out, out
    assert "'weight' holds numbers with text" in out, out  # a unit, written small
    assert "'installs' holds numbers with a scale letter" in out, out
    asked = {"p": data_preview_expression(facts=True)}
    found = kernel.execute("", timeout=60, user_expressions=asked).user_expressions["p"]
    facts = split_facts(parse_text_expression(found) or "")[1]["retail.csv"]
    assert facts.numeric == ("streams",), facts  # preflight converts no code column


def test_an_identifier_the_task_counts_that_repeats_gets_nunique(kernel, kernel_workdir):
    """chipotle: 'How many orders were made?' counts order_id's values, not its lines."""
    folder = kernel_workdir / "orders"
    folder.mkdir(exist_ok=True)
    frame = pd.DataFrame(
        {
            "order_id": [1 + i // 3 for i in range(90)],  # three lines an order
            "InvoiceNo": [str(500 + i) for i in range(90)],  # unique: no line
            "item_name": ["Chips", "Bowl", "Soda"] * 30,
            "quantity": [1 + i % 2 for i in range(90)],
        }
    )
    frame.to_csv(folder / "orders.tsv", sep="\t", index=False)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok

    def told(task: str) -> str:
        expression = data_preview_expression(budget_chars=4000, focus=task)
        result = kernel.execute("", timeout=60, user_expressions={"p": expression})
        return parse_text_expression(result.user_expressions["p"]) or ""

    out = told("How many orders were made, and how many invoices?")
    line = "! 'order_id' repeats (30 distinct values in 90 rows): one order has several rows"
    assert line in out and "count orders with df['order_id'].nunique()" in out, out
    assert "'InvoiceNo' repeats" not in out
    fixed = kernel.execute(
        "import pandas as pd\nprint(pd.read_csv('orders.tsv', sep='\\t')['order_id'].nunique())",
        timeout=30,
    )
    assert stdout(fixed) == "30\n"
    # a task that counts no orders, or names no identifier, is told nothing of it
    for task in ("What is the mean quantity?", "How many rows mention Chips?", ""):
        assert "repeats" not in told(task), task


def test_header_lines_repeated_inside_a_joined_export_are_named_with_the_drop(
    kernel, kernel_workdir
):
    folder = kernel_workdir / "joined"
    folder.mkdir(exist_ok=True)
    chunk = "stamp,device,temp\n" + "".join(
        f"2023-03-0{1 + i % 9},D{i % 3},2{i % 10}.5\n" for i in range(30)
    )
    (folder / "log.csv").write_text(chunk * 3)  # three exports, each with its header
    twin = "name,kind\nname,a\nb,kind\nc,d\n"  # a value that is its column's name: no header
    (folder / "twin.csv").write_text(twin)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    out = preview(kernel, budget_chars=4000)
    line = "! 2 rows repeat the header line (files joined together): drop them first: "
    assert line + "df = df[df['stamp'] != 'stamp'].reset_index(drop=True)" in out, out
    assert out.count("repeat the header line") == 1, out
    run = kernel.execute(
        "import pandas as pd\ndf = pd.read_csv('log.csv')\n"
        "df = df[df['stamp'] != 'stamp'].reset_index(drop=True)\n"
        "print(len(df), pd.to_numeric(df['temp']).mean())",
        timeout=30,
    )
    assert stdout(run) == "90 25.0\n", run.outputs


def test_preview_flags_numbers_stored_as_text_and_its_fix_makes_them_numbers(
    kernel, kernel_workdir
):
    folder = kernel_workdir / "textnums"
    folder.mkdir(exist_ok=True)
    n = 40
    frame = pd.DataFrame(
        {
            "streams": [str(1_000_000 + i) for i in range(n)],
            "plays": [f"{1000 + i:,}" for i in range(n)],
            "wait": [f"{i} min" if i % 4 else f"{i}-{i + 5} min" for i in range(n)],
            "price": [f"${i}.50" for i in range(n)],
            " Age": [float(i) if i % 5 else None for i in range(n)],
        }
    )
    frame.loc[7, "streams"] = "BPM110KeyAModeMajor"  # one corrupt row makes a text column
    frame.to_csv(folder / "chart.csv", index=False)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    out = preview(kernel, budget_chars=4000)
    assert "! column names with a space at an end: ' Age'" in out
    assert "whole numbers as float64 because of missing values: ' Age'" in out
    assert (
        "'streams' holds numbers stored as text (1 not numbers, e.g. 'BPM110KeyAModeMajor')" in out
    )
    codes = _fixes(out)
    flagged = [c.split("]", 1)[0] for c in codes]
    assert flagged == ["df['streams'", "df['plays'", "df['wait'", "df['price'"], out
    run = "import pandas as pd\ndf = pd.read_csv('chart.csv')\n"
    # the numbers-with-units line names an expression; the others are assignments
    run += "\n".join(c if " = " in c else f"df['wait'] = {c}" for c in codes)
    run += "\nprint(df['streams'].sum(), df['plays'].sum(), df['price'].sum(), df['wait'].sum())"
    check = kernel.execute(run, timeout=30)
    expected = sum(1_000_000 + i for i in range(n) if i != 7)
    assert check.ok, check.outputs
    assert stdout(check) == (
        f"{float(expected)} {sum(1000 + i for i in range(n))} {sum(i + 0.5 for i in range(n))} "
        f"{float(sum(range(n)))}\n"
    ), (out, check.outputs)


def test_preview_reads_a_scale_letter_as_a_scale_and_its_fix_gives_the_full_numbers(
    kernel, kernel_workdir
):
    """'149k' is 149,000, not 149 (scratch survey, 2026-12-07: "mean income in dollars" came
    out as 84.43): the fix multiplies by the letter's scale, and the facts do not call the
    letter a unit, which preflight would strip."""
    folder = kernel_workdir / "scaled"
    folder.mkdir(exist_ok=True)
    n = 40
    frame = pd.DataFrame(
        {
            "Annual Income": [f"{20 + i}k" for i in range(n)],
            "Installs": [f"{i}.5M" if i % 3 else f"{100 + i}k" for i in range(n)],
            "Weight": [f"{50 + i} kg" for i in range(n)],
            "Downloads": [f"{10 ** (i % 4 + 2):,}+" for i in range(n)],  # few values: '1,000+'
        }
    )
    frame.to_csv(folder / "people.csv", index=False)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    out = preview(kernel, budget_chars=4000)
    assert "'Annual Income' holds numbers with a scale letter ('20k'" in out, out
    assert "'Weight' holds numbers with text ('50 kg'" in out, out
    codes = [c for c in _fixes(out) if c.startswith(("df['Annual", "df['Installs", "df['Down"))]
    assert len(codes) == 3, out
    run = "import pandas as pd\ndf = pd.read_csv('people.csv')\n" + "\n".join(codes)
    run += "\nprint(df['Annual Income'].sum(), df['Installs'].sum(), df['Downloads'].sum())"
    check = kernel.execute(run, timeout=30)
    income = float(sum((20 + i) * 1000 for i in range(n)))
    installs = sum((i + 0.5) * 1e6 if i % 3 else (100 + i) * 1e3 for i in range(n))
    downloads = sum(10 ** (i % 4 + 2) for i in range(n))
    assert check.ok and stdout(check) == f"{income} {installs} {downloads}\n", (out, check.outputs)
    asked = {"p": data_preview_expression(facts=True)}
    found = kernel.execute("", timeout=60, user_expressions=asked).user_expressions["p"]
    facts = split_facts(parse_text_expression(found) or "")[1]["people.csv"]
    assert facts.units == ("Weight",) and facts.numeric == ("Downloads",), facts


def test_preview_gives_fixes_only_for_the_columns_the_task_names(kernel, kernel_workdir):
    """A small model copies every fix it is shown into its first cell (a wide export's
    fixes cut its reply at the token limit, or put the wrong column in its code)."""
    folder = kernel_workdir / "textnums_focus"
    folder.mkdir(exist_ok=True)
    n = 40
    frame = pd.DataFrame(
        {
            "Body wt": [f"{i} kg" for i in range(n)],
            "brain.wt": [f"{i}.5 g" for i in range(n)],
            "plays": [f"{1000 + i:,}" for i in range(n)],
            "Delta 15 N (o/oo)": [float(i) if i % 5 else None for i in range(n)],
            "rating": [float(i) if i % 7 else None for i in range(n)],
            "Sampled": [f"{1 + i % 12:02d}/{1 + i % 28:02d}/2021" for i in range(n)],
        }
    )
    frame.to_csv(folder / "chart.csv", index=False)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    expression = data_preview_expression(
        budget_chars=4000, focus="The mean of body wt by Delta 15 N, in chart.csv?"
    )
    result = kernel.execute("", timeout=60, user_expressions={"p": expression})
    out = parse_text_expression(result.user_expressions["p"]) or ""
    flagged = [c.split("]", 1)[0] for c in _fixes(out)]
    assert flagged == ["df['Body wt'"], out  # named in another case
    assert "whole numbers as float64 because of missing values: 'Delta 15 N (o/oo)'" in out
    assert "'rating'" not in out.split("whole numbers")[1].split("\n")[0]
    assert "other columns hold text to convert: 'brain.wt' (numbers), 'plays' (numbers), " in out
    assert "'Sampled' (dates)" in out
    # a date column keeps its fix line when the task speaks of time
    expression = data_preview_expression(budget_chars=4000, focus="The monthly mean of body wt?")
    result = kernel.execute("", timeout=60, user_expressions={"p": expression})
    monthly = parse_text_expression(result.user_expressions["p"]) or ""
    assert [c.split("]", 1)[0] for c in _fixes(monthly)] == ["df['Body wt'", "df['Sampled'"]
    # a task that names none of the columns keeps every fix line
    everything = preview(kernel, budget_chars=4000)
    assert len(_fixes(everything)) == 4, everything


def test_preview_names_missing_values_written_as_text_and_its_fix_counts_them(
    kernel, kernel_workdir
):
    folder = kernel_workdir / "marks"
    folder.mkdir(exist_ok=True)
    frame = pd.DataFrame(
        {
            "Sex": ["MALE", "FEMALE", ".", "MALE", "?", None] * 8,
            "Note": ["ok", " ", "fine", "good"] * 12,
            "Level": ["low", "-", "high", "mid", "low", "mid"] * 8,
            "Mass": [float(i) if i % 6 else None for i in range(48)],
        }
    )
    frame.to_csv(folder / "marks.csv", index=False)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    out = preview(kernel, budget_chars=4000)
    assert "! 'Sex' writes a missing value as '.' or '?' (16 rows): " in out, out
    assert "! 'Note' writes a missing value as ' ' (12 rows): " in out, out
    assert "! 'Level' writes a missing value as '-' (8 rows): " in out, out
    assert "(16 of 48 rows have one)" in out, out  # Sex's 8 NaN and Mass's 8, in other rows
    fixes = [line.split("): ", 1)[1] for line in out.splitlines() if "writes a missing" in line]
    run = "import pandas as pd\ndf = pd.read_csv('marks.csv')\n" + "\n".join(fixes)
    run += "\nprint(df['Sex'].isna().sum(), df['Note'].isna().sum(), df['Level'].isna().sum())"
    check = kernel.execute(run, timeout=30)
    assert check.ok and stdout(check) == "24 12 8\n", (out, check.outputs)


def test_preview_names_text_pandas_reads_as_missing_and_its_read_keeps_it(kernel, kernel_workdir):
    """'None' as an answer and 'null' as a region's code are values pandas reads as gaps by
    default. 'NA', which the file also writes in a column of numbers, is its gap mark: no
    line for it."""
    folder = kernel_workdir / "na_text"
    folder.mkdir(exist_ok=True)
    (folder / "survey.csv").write_text(
        "Exer,Region,Height\n"
        + "Freq,EU,170\nNone,NA,NA\nSome,NA,180\nNone,,165\n,EU,\nNone,null,172\n" * 4
    )
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    out = preview(kernel, budget_chars=4000)
    assert "! 'Exer' holds the text 'None' (12 rows), which pandas reads as missing" in out, out
    assert "! 'Region' holds the text 'null' (4 rows), which" in out, out
    assert "'NA' (" not in out and "'Height' holds" not in out, out
    fixes = [line.split("missing: ", 1)[1] for line in out.splitlines() if "gaps missing" in line]
    read = "df = pd.read_csv('survey.csv', keep_default_na=False, na_values=['', 'NA'])"
    assert fixes == [read, read], out  # one read, right for every column (NA: its gaps)
    run = "import pandas as pd\n" + read
    run += "\nprint((df['Exer'] == 'None').sum(), df['Exer'].isna().sum(), "
    run += "(df['Region'] == 'null').sum(), df['Height'].isna().sum(), df['Height'].dtype)"
    check = kernel.execute(run, timeout=30)
    # the read keeps the values; Height's 'NA' stays a gap, and Height a number column
    assert check.ok and stdout(check).split() == ["12", "4", "4", "8", "float64"], (
        out,
        check.outputs,
    )


def test_preview_names_no_text_read_as_missing_in_a_column_the_task_does_not_name(
    kernel, kernel_workdir
):
    folder = kernel_workdir / "na_text_focus"
    folder.mkdir(exist_ok=True)
    (folder / "survey.csv").write_text("Exer,Region\n" + "None,EU\nFreq,NA\n" * 4)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    expression = data_preview_expression(
        budget_chars=4000, focus="How many students answered None in Exer?"
    )
    result = kernel.execute("", timeout=60, user_expressions={"p": expression})
    out = parse_text_expression(result.user_expressions["p"]) or ""
    assert "! 'Exer' holds the text 'None' (4 rows)" in out, out
    assert "'Region' holds" not in out, out


def test_preview_names_the_format_of_dates_stored_as_text(kernel, kernel_workdir):
    folder = kernel_workdir / "dates"
    folder.mkdir(exist_ok=True)
    days = pd.date_range("2008-11-01", periods=40, freq="D")
    frame = pd.DataFrame(
        {
            "us": days.strftime("%m/%d/%y"),  # 11/01/08: month first, a two-digit year
            "eu": days.strftime("%d.%m.%Y"),  # 13.11.2008: day first (days past 12 tell)
            "iso": days.strftime("%Y-%m-%d"),
            "code": [f"A{i}" for i in range(40)],
        }
    )
    frame.to_csv(folder / "eggs.csv", index=False)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    out = preview(kernel, budget_chars=3000)
    fixes = [line.split(": ", 1)[1] for line in out.splitlines() if "dates as text" in line]
    assert (
        len(fixes) == 3
        and "'code'" not in out.split("columns:")[1].split("missing")[0].split("!")[-1]
    )
    run = "import pandas as pd\ndf = pd.read_csv('eggs.csv')\n" + "\n".join(fixes)
    run += "\nprint((df['us'] == df['iso']).all(), (df['eu'] == df['iso']).all(), df['us'].dt.year.max())"
    check = kernel.execute(run, timeout=30)
    assert check.ok and stdout(check) == "True True 2008\n", (out, check.outputs)


@pytest.mark.parametrize(
    ("above", "sep", "skip"),
    [
        ("Sales report 2023\n", ";", 1),  # a title
        ("Exported 05.01.2024\n\nby: admin\n", ",", 3),  # a date, a blank line, an author
        ("Report\tQ4\n", "\t", 1),  # a title of two fields, fewer than the table's four
        ("# source: city portal, 2024\n", "|", 1),  # a comment line with the CSV's comma in it
    ],
)
def test_preview_reads_a_table_below_lines_that_are_not_it(
    kernel, kernel_workdir, above, sep, skip
):
    """From a scratch export (2026-12-07): a title above the header made the preview read the
    title as the only column, and every cell failed on KeyError."""
    folder = kernel_workdir / f"title-{skip}-{ord(sep)}"
    folder.mkdir(exist_ok=True)
    rows = "".join(sep.join([f"d{i}", f"s{i % 3}", str(i), str(2 * i)]) + "\n" for i in range(30))
    (folder / "t.csv").write_text(above + sep.join(["Day", "Store", "Qty", "Amount"]) + "\n" + rows)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    out = preview(kernel, budget_chars=3000)
    assert "30 rows x 4 columns" in out and f"skiprows={skip}" in out, out
    codes = _fixes(out)
    check = kernel.execute(
        "import pandas as pd\n" + codes[0] + "\nprint(list(df.columns), df['Amount'].sum())",
        timeout=30,
    )
    assert stdout(check) == f"['Day', 'Store', 'Qty', 'Amount'] {2 * sum(range(30))}\n", out


@pytest.mark.parametrize(
    "body",
    [
        "a,b\n" + "".join(f"r{i},{i},{2 * i}\n" for i in range(20)),  # R's write.table
        "a,b,c\n1,2\n" + "".join(f"{i},{i},{i}\n" for i in range(20)),  # a short first row
        "a,b,c\n" + "".join(f"{i},{i},{i}\n" for i in range(20)),
    ],
)
def test_preview_skips_no_line_of_a_table_whose_header_is_its_first_line(
    kernel, kernel_workdir, body
):
    folder = kernel_workdir / f"noskip-{abs(hash(body)) % 10_000}"
    folder.mkdir(exist_ok=True)
    (folder / "t.csv").write_text(body)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    out = preview(kernel, budget_chars=3000)
    assert "skiprows" not in out and "not the table" not in out, out


def test_preview_names_durations_and_one_value_written_several_ways_with_fixes_that_work(
    kernel, kernel_workdir
):
    """From scratch questions (2026-12-07): '1h 26min' runtimes were read with to_numeric
    (every value nan), and 'female' was counted as 'Female' alone where the column also
    writes 'female ' and 'F'."""
    folder = kernel_workdir / "spelt"
    folder.mkdir(exist_ok=True)
    n = 60
    gender = ["Male", "male", "MALE", "Female", "female ", "F"]
    frame = pd.DataFrame(
        {
            "runtime": [f"{(80 + i) // 60}h {(80 + i) % 60}min" for i in range(n)],
            "Gender": [gender[i % 6] for i in range(n)],
            "Churn": ["Yes" if i % 4 else "No" for i in range(n)],
            "Unit": ["kg", "g", "KG", "mg", "G", "L"] * (n // 6),  # no letter for one word
        }
    )
    frame.to_csv(folder / "m.csv", index=False)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    expression = data_preview_expression(budget_chars=4000, focus="How many are female?")
    result = kernel.execute("", timeout=60, user_expressions={"p": expression})
    out = parse_text_expression(result.user_expressions["p"]) or ""
    assert "'runtime' holds durations as text (e.g. '1h 20min')" in out, out
    assert "'Gender' writes one value in several ways" in out and "'female '" in out, out
    assert "'Churn' writes" not in out and "'Unit' writes one value" in out, out
    codes = [c for c in _fixes(out) if c.startswith(("df['runtime'", "df['Gender'"))]
    run = "import pandas as pd\ndf = pd.read_csv('m.csv')\n" + "\n".join(codes)
    run += "\nprint(df['runtime'].sum(), (df['Gender'] == 'female').sum())"
    check = kernel.execute(run, timeout=30)
    assert stdout(check) == f"{float(sum(80 + i for i in range(n)))} {n // 2}\n", (out, check)


def test_preview_reads_a_sheet_below_its_title_rows_and_nested_json_records_flat(
    kernel, kernel_workdir
):
    """From scratch questions (2026-12-07): a sheet with a title and a blank row above its
    header came out as 'Unnamed: 1' columns (the run gave up on KeyError: 'Units Sold'), and
    likes nested in a JSON post ({'stats': {'likes': 3}}) were not found."""
    import json

    folder = kernel_workdir / "sheets"
    folder.mkdir(exist_ok=True)
    table = pd.DataFrame({"Region": ["N", "S"] * 10, "Units Sold": range(20)})
    with pd.ExcelWriter(folder / "q3.xlsx") as xw:
        pd.DataFrame([["Quarterly report"], ["all stores"]]).to_excel(
            xw, sheet_name="Data", index=False, header=False
        )
        table.to_excel(xw, sheet_name="Data", index=False, startrow=3)
    posts = [
        {"id": i, "stats": {"likes": i * 2, "shares": 1}, "user": {"c": "FR"}} for i in range(9)
    ]
    (folder / "posts.json").write_text(json.dumps(posts))
    (folder / "posts.jsonl").write_text("\n".join(json.dumps(p) for p in posts))
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    out = preview(kernel, budget_chars=6000)
    assert "20 rows x 2 columns (the first 3 rows are not the table" in out, out
    assert out.count("'stats.likes' int64") == 2, out
    for code in _reads(out):
        check = kernel.execute(
            "import pandas as pd\n" + code + "\nprint(df.iloc[:, 1].sum())", timeout=30
        )
        assert stdout(check) in (f"{sum(range(20))}\n", f"{sum(range(9)) * 2}\n"), (code, check)


def _reads(out: str) -> list[str]:
    return [
        line.split("read it with: ", 1)[1] for line in out.splitlines() if "read it with: " in line
    ]


@pytest.mark.parametrize(
    ("last", "flagged"),
    [
        ("Total,{v},{s}", True),
        (",{v},{s}", True),  # no label: the sums alone tell
        ("Shop 99,{v},7", False),  # one column of two sums up: a record
        ("Shop 99,5,7", False),
        ("Mean,{m},{m}", False),
    ],
)
def test_preview_names_a_last_row_of_totals_and_only_that(kernel, kernel_workdir, last, flagged):
    """From a scratch question (2026-12-07): an export's 'Total' line was counted as one more
    shop, so the mean sales came out at twice the true mean, and the best shop was 'Total'."""
    folder = kernel_workdir / f"totals-{abs(hash(last)) % 10_000}"
    folder.mkdir(exist_ok=True)
    visits, sales = list(range(1, 21)), [3 * i for i in range(1, 21)]
    rows = "".join(
        f"Shop {i},{v},{s}\n" for i, (v, s) in enumerate(zip(visits, sales, strict=True))
    )
    tail = last.format(v=sum(visits), s=sum(sales), m=sum(visits) / 20)
    (folder / "shops.csv").write_text("Shop,Visits,Sales\n" + rows + tail + "\n")
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    out = preview(kernel, budget_chars=3000)
    line = [ln for ln in out.splitlines() if "holds the totals of the rows above" in ln]
    assert bool(line) is flagged, out
    if flagged:
        fix = line[0].split("not a record: ", 1)[1]
        code = (
            f"import pandas as pd\ndf = pd.read_csv('shops.csv')\n{fix}\nprint(df['Sales'].mean())"
        )
        check = kernel.execute(code, timeout=30)
        assert stdout(check) == f"{sum(sales) / 20}\n", (fix, check)
    asked = {"p": data_preview_expression(facts=True)}
    found = kernel.execute("", timeout=60, user_expressions=asked).user_expressions["p"]
    facts = split_facts(parse_text_expression(found) or "")[1]["shops.csv"]
    assert facts.total == (("Shop", "Total") if flagged and last.startswith("Total") else None)
    assert facts.shown == ("Shop 0", "Shop 1", "Shop 2")  # the labels of the rows shown


def test_preview_names_dates_in_two_formats_and_dates_stored_as_numbers(kernel, kernel_workdir):
    """Dates a Kaggle export writes in two shapes in one column, as yyyymmdd numbers and as
    seconds since 1970: each gets the line whose fix makes them dates."""
    folder = kernel_workdir / "numdates"
    folder.mkdir(exist_ok=True)
    days = pd.date_range("2019-01-13", periods=40, freq="D")
    frame = pd.DataFrame(
        {
            "Order Date": [
                d.strftime("%Y-%m-%d" if i % 2 else "%B %d, %Y") for i, d in enumerate(days)
            ],
            "date_id": days.strftime("%Y%m%d").astype(int),
            "timestamp": (days - pd.Timestamp("1970-01-01")) // pd.Timedelta("1s"),
            "issued_at": (days - pd.Timestamp("1970-01-01")) // pd.Timedelta("1s"),
            "count": range(40),
        }
    )
    frame.to_csv(folder / "orders.csv", index=False)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    out = preview(kernel, budget_chars=4000)
    assert "'Order Date' holds dates as text (e.g. 'January 13, 2019', '2019-01-14')" in out, out
    assert "'date_id' holds dates as numbers (e.g. 20190113)" in out, out
    assert "'timestamp' holds times as seconds since 1970" in out and "'count' holds" not in out
    assert "'issued_at' holds times as seconds since 1970" in out  # a name ending in 'at'
    fixes = [
        line.split(": df[", 1)[1]
        for line in out.splitlines()
        if "holds dates" in line or "holds times" in line
    ]
    run = "import pandas as pd\ndf = pd.read_csv('orders.csv')\n" + "\n".join(
        "df[" + f for f in fixes
    )
    run += "\nprint((df['Order Date'] == df['date_id']).all(), (df['timestamp'] == df['date_id']).all())"
    check = kernel.execute(run, timeout=30)
    assert stdout(check) == "True True\n", (out, check.outputs)
    # preflight reads yyyymmdd numbers as text with their format (a fact of the file)
    asked = {"p": data_preview_expression(facts=True)}
    found = kernel.execute("", timeout=60, user_expressions=asked).user_expressions["p"]
    facts = split_facts(parse_text_expression(found) or "")[1]["orders.csv"]
    assert facts.dates.get("date_id") == "%Y%m%d" and facts.dates.get("issued_at") == "%s", facts


def test_preview_names_lists_written_as_text_and_its_fix_reads_them(kernel, kernel_workdir):
    """Kaggle exports write a list per row as text (TMDB's genres): counting a genre needs
    the lists read first."""
    folder = kernel_workdir / "listed"
    folder.mkdir(exist_ok=True)
    genres = [["Action", "Drama"], ["Drama"], [], ["Comedy", "Drama"]] * 10
    frame = pd.DataFrame(
        {
            "genres": [str(g) for g in genres],
            "crew": [str([{"id": i, "name": f"n{i}"}]) for i in range(40)],
            "note": ["[draft]"] * 40,  # brackets, not a list
        }
    )
    frame.to_csv(folder / "movies.csv", index=False)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    out = preview(kernel, budget_chars=4000)
    assert "'genres' holds lists written as text" in out and "'note' holds lists" not in out, out
    assert "'crew' holds lists written as text" in out and "a list of dicts" in out, out
    line = next(ln for ln in out.splitlines() if "'genres' holds lists" in ln)
    fix = line.split(": import ast; ", 1)[1].split("; one row per item", 1)[0]
    run = f"import ast\nimport pandas as pd\ndf = pd.read_csv('movies.csv')\n{fix}\n"
    run += "print(df.explode('genres')['genres'].value_counts()['Drama'])"
    check = kernel.execute(run, timeout=30)
    assert stdout(check) == "30\n", (out, check.outputs)


def test_preview_reads_padded_dates_and_money_with_a_scale_letter(kernel, kernel_workdir):
    """Netflix's date_added (' June 09, 2021', a blank in front) and TMDB-like budgets
    ('$16.3M', '$850K'): the fixes strip the blank and multiply by the scale; a padded date
    column's format is not a fact preflight would add to a cell's to_datetime (it would
    fail on the blank)."""
    folder = kernel_workdir / "padded"
    folder.mkdir(exist_ok=True)
    days = pd.date_range("2019-01-13", periods=40, freq="D")
    frame = pd.DataFrame(
        {
            "date_added": [" " + d.strftime("%B %d, %Y") for d in days],
            "budget": [f"${i + 1}.5M" if i % 2 else f"${100 + i}K" for i in range(40)],
        }
    )
    frame.to_csv(folder / "titles.csv", index=False)
    assert kernel.execute(f"import os; os.chdir({str(folder)!r})", timeout=30).ok
    expression = data_preview_expression(budget_chars=4000, facts=True)
    found = kernel.execute("", timeout=60, user_expressions={"p": expression}).user_expressions["p"]
    out, facts = split_facts(parse_text_expression(found) or "")
    codes = [c for c in _fixes(out) if c.startswith(("df['date_added'", "df['budget'"))]
    assert len(codes) == 2 and facts["titles.csv"].dates == {}, out
    run = "import pandas as pd\ndf = pd.read_csv('titles.csv')\n" + "\n".join(codes)
    run += "\nprint(df['date_added'].dt.year.sum(), df['budget'].sum())"
    check = kernel.execute(run, timeout=30)
    budget = sum((i + 1.5) * 1e6 if i % 2 else (100 + i) * 1e3 for i in range(40))
    assert stdout(check) == f"{2019 * 40} {budget}\n", (out, check.outputs)
