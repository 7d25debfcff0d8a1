"""preflight: a cell gets the preview's column names, read call and date format before it runs.

The units hold it against facts written here; the kernel tests take the facts from the
real preview of messy files in a real kernel and run the corrected cells there.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest
from preview_sample import FACTS

from kernel_agent.agent.preflight import preflight
from kernel_agent.kernel_state.kernel_probe import data_preview_expression, parse_text_expression
from kernel_agent.kernel_state.namespace import VariableInfo
from kernel_agent.kernel_state.preview_facts import FileFacts, split_facts


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("Species", "Species "),  # a space at an end
        ("species", "Species "),  # case
        ("Body Mass (g)", "Body Mass (g) "),
        ("body_mass_g", "Body Mass (g) "),  # underscores for spaces and brackets
        ("Flipper Length", "Flipper Length (mm)"),  # the unit left out
        ("Delta 15 N", "Delta 15 N (o/oo)"),
        ("avg wait time", "avg. wait time"),  # a dot
        ("AVG_WAIT_TIME", "avg. wait time"),
    ],
)
def test_a_column_name_is_written_as_the_file_has_it(written, meant):
    code = f"print(df[{written!r}].mean())"
    assert preflight(code, FACTS) == f"print(df[{meant!r}].mean())"


def test_every_way_of_naming_columns_in_one_cell_is_corrected_at_once():
    code = (
        "a = df[df['species'].str.startswith('Adelie')]\n"
        "print(a[['Delta 15 N', 'flipper length']].mean())\n"
        "print(df.groupby('island')['body mass'].mean())\n"
        "print(df.sort_values(by='Flipper Length').dropna(subset=['Delta 13 C']))\n"
    )
    assert preflight(code, FACTS) == (
        "a = df[df['Species '].str.startswith('Adelie')]\n"
        "print(a[['Delta 15 N (o/oo)', 'Flipper Length (mm)']].mean())\n"
        "print(df.groupby('Island')['Body Mass (g) '].mean())\n"
        "print(df.sort_values(by='Flipper Length (mm)').dropna(subset=['Delta 13 C (o/oo)']))\n"
    )


@pytest.mark.parametrize(
    "code",
    [
        "print(df['Delta'].mean())",  # two columns start so: no guess
        "print(df['Adelie'])",  # names no column at all
        "df['species'] = 1\nprint(df['species'])",  # a column the cell makes
        "df = df.rename(columns=str.lower)\nprint(df['species'])",  # renamed first
        "df.columns = df.columns.str.lower()\nprint(df['species'])",  # renamed first
        "d = {'island': 3}\nprint(d['island'])",  # a dict's key
        "print(df['Island'] == 'dream')",  # a value, not a column
        "print(df[",  # not Python
    ],
)
def test_what_is_not_surely_a_misspelt_column_is_left_alone(code):
    assert preflight(code, FACTS) == code


def test_a_task_that_renamed_columns_before_keeps_its_names():
    earlier = ["df.columns = [c.strip().lower() for c in df.columns]"]
    assert preflight("print(df['species'])", FACTS, earlier=earlier) == "print(df['species'])"
    made = ["df['ratio'] = df['Island'].str.len()"]
    assert preflight("print(df['Ratio'])", FACTS, earlier=made) == "print(df['Ratio'])"


def test_names_the_kernel_reports_are_known_and_a_cut_list_stops_the_guessing():
    frame = VariableInfo("df", "DataFrame", shape="(344, 2)", columns=("species", "x"))
    assert preflight("df['species']", FACTS, {"df": frame}) == "df['species']"
    cut = VariableInfo("w", "DataFrame", shape="(9, 40)", columns=tuple(f"c{i}" for i in range(20)))
    assert preflight("df['species']", FACTS, {"w": cut}) == "df['species']"
    # unless the cell reads the file itself: its columns are the preview's
    code = "df = pd.read_csv('penguins.csv')\ndf['species']"
    assert preflight(code, FACTS, {"w": cut}).endswith("df['Species ']")
    box = VariableInfo("box", "dict", len=2)
    assert preflight("box['island']", FACTS, {"box": box}) == "box['island']"


def test_a_read_call_gets_the_separator_encoding_and_decimal_the_preview_read_with():
    assert preflight("w = pd.read_csv('weather.txt')", FACTS) == (
        "w = pd.read_csv('weather.txt', sep='|')"
    )
    assert preflight("v = pd.read_csv('./votes.csv', encoding='utf-8', sep=',')", FACTS) == (
        "v = pd.read_csv('./votes.csv', encoding='latin-1', sep=';', decimal=',')"
    )
    assert preflight("w = pd.read_table('weather.txt',)", FACTS) == (
        "w = pd.read_table('weather.txt', sep='|',)"
    )
    for kept in (
        "w = pd.read_csv('weather.txt', sep=None, engine='python')",
        "w = pd.read_csv('other.csv')",
        "w = pd.read_csv(name)",
        "w = pd.read_csv('weather.txt', **opts)",
    ):
        assert preflight(kept, FACTS) == kept


def test_a_table_of_blank_separated_fields_is_read_with_its_separator():
    """pandas-exercises' wind.data: fields lined up by runs of blanks. The bundled model
    wrote delim_whitespace=True, which pandas 3 refuses, then sep=' ' (2026-12-07)."""
    wind = {"wind.data": FileFacts(delimited=True, sep=r"\s+", columns=("Yr", "Mo", "RPT"))}
    assert preflight("w = pd.read_csv('wind.data')", wind) == (
        "w = pd.read_csv('wind.data', sep=r'\\s+')"
    )
    assert preflight("w = pd.read_csv('wind.data', delim_whitespace=True)", wind) == (
        "w = pd.read_csv('wind.data', sep=r'\\s+')"
    )
    assert preflight("w = pd.read_csv('wind.data', sep=' ')", wind) == (
        "w = pd.read_csv('wind.data', sep=r'\\s+')"
    )
    kept = "w = pd.read_csv('wind.data', sep='\\s+')"
    assert preflight(kept, wind) == kept


def test_a_filter_value_is_written_as_the_column_holds_it():
    values = {
        "Species ": ("Adelie Penguin (Pygoscelis adeliae)", "Gentoo penguin (Pygoscelis papua)"),
        "Sex": ("MALE", "FEMALE", "."),
        "Island": ("Dream", "Torgersen", "Biscoe"),
    }
    facts = {"p.csv": FileFacts(columns=(*values, "x"), values=values)}
    code = (
        "a = df[(df['species'] == 'Adelie') & (df['Sex'] != 'male')]\n"
        "b = df[df['Island'].isin(['dream', 'Torgersen'])]\n"
    )
    assert preflight(code, facts) == (
        "a = df[(df['Species '] == 'Adelie Penguin (Pygoscelis adeliae)') & (df['Sex'] != 'MALE')]\n"
        "b = df[df['Island'].isin(['Dream', 'Torgersen'])]\n"
    )
    for kept in (
        "df[df['Island'] == 'Dream']",  # a value the column has
        "df[df['Island'] == 'Mars']",  # none like it
        "df[df['Species '] == 'Pygoscelis']",  # inside a value, not its start
        "df[df['Sex'] == 'ma']",  # 'MALE' starts so, but only part of a word
        "df[df['x'] == 'a']",  # values not known
    ):
        assert preflight(kept, facts) == kept


def test_a_filter_value_cut_short_as_the_preview_shows_it_is_written_whole():
    """The messy tuned half: the preview's rows cut long values ('Adelie Penguin (Pygo...)')
    and the model filtered on the cut text, which matched nothing (a nan p-value)."""
    values = {
        "Species ": ("Adelie Penguin (Pygoscelis adeliae)", "Gentoo penguin (Pygoscelis papua)"),
        "Region": ("Anvers Island North", "Anvers Island South"),
    }
    facts = {"p.csv": FileFacts(columns=(*values, "x"), values=values)}
    code = (
        "a = df[df['Species '] == 'Adelie Penguin (Pygo...)']\n"  # the bracket closed
        "c = df[df['Species '] == 'Gentoo pen...']\nb = df[df.Region != 'gentoo…']\n"
    )
    assert preflight(code, facts) == (
        "a = df[df['Species '] == 'Adelie Penguin (Pygoscelis adeliae)']\n"
        "c = df[df['Species '] == 'Gentoo penguin (Pygoscelis papua)']\n"
        "b = df[df.Region != 'gentoo…']\n"  # not that column's value: kept
    )
    for kept in (
        "df[df['Region'] == 'Anvers Isl...']",  # two values start so
        "df[df['Species '] == '...']",  # nothing before the cut
    ):
        assert preflight(kept, facts) == kept


def test_names_stripped_as_the_preview_advises_are_corrected_as_stripped():
    """The preview advises ``df.columns = df.columns.str.strip()`` for names with end spaces;
    a cell that followed it lost every correction (the messy tuned half: ``df['Year']``)."""
    values = {
        "Species ": ("Adelie Penguin (Pygoscelis adeliae)", "Gentoo penguin (Pygoscelis papua)")
    }
    columns = ("Species ", "Date Egg", "Body Mass (g) ")
    facts = {
        "p.csv": FileFacts(
            delimited=True, columns=columns, dates={"Date Egg": "%m/%d/%y"}, values=values
        )
    }
    read = "import pandas as pd\ndf = pd.read_csv('p.csv')\n"
    strip = "df.columns = df.columns.str.strip()\n"
    use = "print(df[df['Year'] == 2008].shape[0], df[df['Species'] == 'Adelie']['Body Mass'].sum())"
    assert preflight(read + strip + use, facts) == read + strip + (
        "print(df[pd.to_datetime(df['Date Egg'], format='%m/%d/%y').dt.year == 2008].shape[0], "
        "df[df['Species'] == 'Adelie Penguin (Pygoscelis adeliae)']['Body Mass (g)'].sum())"
    )
    # stripped in an earlier cell of the task: this one reads no file, the names are stripped
    assert preflight("print(df['Body Mass'].sum())", facts, earlier=[read + strip]) == (
        "print(df['Body Mass (g)'].sum())"
    )
    # not stripped: the names as the file has them
    assert preflight(read + "print(df['Body Mass'].sum())", facts) == (
        read + "print(df['Body Mass (g) '].sum())"
    )
    # used before the strip only: the names as the file has them
    before = read + "x = df['Species'].nunique()\n" + strip
    assert preflight(before, facts) == before.replace("'Species'", "'Species '")
    for kept in (
        read + "x = df['Species'].nunique()\n" + strip + use,  # before and after it
        read + strip + "df = df.rename(columns={'Species': 'sp'})\nprint(df['Body Mass'])",
        read + "df.columns = df.columns.str.lower()\nprint(df['body mass'])",
    ):
        assert preflight(kept, facts) == kept


def test_a_header_read_as_data_with_names_for_every_column_is_read_as_the_header():
    """The follow-up suite's tuned half: ``header=None, names=[the file's columns]`` made
    the header line a row (343 penguins for 342)."""
    facts = {"p.csv": FileFacts(delimited=True, columns=("Species ", "Island", "Mass"))}
    for names in ("['Species', 'Island', 'Mass']", "('a', 'b', 'c')"):
        code = f"peng = pd.read_csv('p.csv', header=None, names={names})"
        assert preflight(code, facts) == code.replace("header=None", "header=0")
    # names alone: pandas reads the file as with header=None
    code = "peng = pd.read_csv('p.csv', names=['a', 'b', 'c'])"
    assert preflight(code, facts) == "peng = pd.read_csv('p.csv', names=['a', 'b', 'c'], header=0)"
    for kept in (
        "peng = pd.read_csv('p.csv', header=None)",  # the model then uses columns 0, 1, 2
        "peng = pd.read_csv('p.csv', header=None, names=['a', 'b'])",  # not one per column
        "peng = pd.read_csv('other.csv', header=None, names=['a', 'b', 'c'])",
    ):
        assert preflight(kept, facts) == kept


def test_numbers_with_one_unit_are_read_as_their_number():
    facts = {"m.csv": FileFacts(delimited=True, columns=("bodywt", "name"), units=("bodywt",))}
    code = "import pandas as pd\ndf = pd.read_csv('m.csv')\nprint(df['bodywt'].median())"
    assert preflight(code, facts) == (
        "import pandas as pd\ndf = pd.read_csv('m.csv')\n"
        "df['bodywt'] = pd.to_numeric(df['bodywt'].astype(str)"
        ".str.extract(r'^\\s*(-?\\d+\\.?\\d*)')[0], errors='coerce')\n"
        "print(df['bodywt'].median())"
    )
    comma = {"m.csv": FileFacts(delimited=True, decimal_comma=True, columns=("b",), units=("b",))}
    kept = "df = pd.read_csv('m.csv')"
    # '3,5 kg': the decimal comma is added, no number is read from the text
    assert preflight(kept, comma) == "df = pd.read_csv('m.csv', decimal=',')"


def test_a_column_the_cell_converts_itself_keeps_its_conversion_and_the_others_get_theirs():
    """The held-out cars93 run (2026-12-07): the cell converted Cylinders itself and divided
    EngineSize, '1.8 L' text, by it; four cells failed the same way."""
    facts = {
        "c.csv": FileFacts(
            delimited=True, columns=("Cylinders", "EngineSize"), numeric=("Cylinders",),
            units=("EngineSize",),
        )
    }  # fmt: skip
    own = "df['Cylinders'] = pd.to_numeric(df['Cylinders'], errors='coerce')\n"
    code = "import pandas as pd\ndf = pd.read_csv('c.csv')\n" + own
    code += "print((df['EngineSize'] / df['Cylinders']).mean())"
    assert preflight(code, facts) == code.replace(
        "df = pd.read_csv('c.csv')\n",
        "df = pd.read_csv('c.csv')\ndf['EngineSize'] = pd.to_numeric(df['EngineSize']"
        ".astype(str).str.extract(r'^\\s*(-?\\d+\\.?\\d*)')[0], errors='coerce')\n",
    )
    for kept in (
        code.replace("print(", "df['EngineSize'] = df['EngineSize'].str.rstrip(' L')"
                     ".astype(float)\nprint("),  # converted its own way
        code.replace("pd.read_csv('c.csv')", "pd.read_csv('c.csv', converters={})"),
    ):  # fmt: skip
        assert preflight(kept, facts) == kept


def test_a_column_filled_in_place_is_filled_by_assignment(fresh_kernel, tmp_path):
    """pandas 3 (copy-on-write): ``df['Age'].fillna(m, inplace=True)`` fills a copy, with
    only a warning; the scratch titanic run's mean age came from the unfilled column."""
    code = (
        "import pandas as pd\ndf = pd.DataFrame({'Age': [1.0, None, 5.0], 'x': [1, 2, None]})\n"
        "df['Age'].fillna(df['Age'].median(), inplace=True)\n"
        "if True:\n    df['x'].replace(2, 7, inplace=True)\n"
        "print(df['Age'].mean(), df['x'].sum())"
    )
    fixed = preflight(code, FACTS)
    assert "df['Age'] = df['Age'].fillna(df['Age'].median())\n" in fixed
    assert "    df['x'] = df['x'].replace(2, 7)\n" in fixed
    k = fresh_kernel(cwd=tmp_path)
    before = "".join(o.get("text", "") for o in k.execute(code, timeout=60).outputs)
    after = "".join(o.get("text", "") for o in k.execute(fixed, timeout=60).outputs)
    assert after == "3.0 8.0\n", (fixed, after)
    assert before != after  # as written, the fill changed nothing (pandas 3)
    for kept in (
        "df.fillna(0, inplace=True)",  # the frame itself: works
        "df['Age'] = df['Age'].fillna(0)",
        "df['Age'].fillna(0, inplace=False)",
        "x = df['Age'].fillna(0, inplace=True)",  # not a statement of its own
    ):
        assert preflight(kept, FACTS) == kept


def test_a_correlation_of_two_columns_with_gaps_keeps_the_pairs_with_both(fresh_kernel, tmp_path):
    """scipy's pearsonr takes no nan_policy and is nan with one gap (the scratch titanic
    run answered "nan, P-value nan" for Fare and Age, 2026-12-07)."""
    code = (
        "import pandas as pd\nfrom scipy import stats\n"
        "df = pd.DataFrame({'Fare': [1.0, 2.0, 3.0, 4.0, 5.0], 'Age': [2.0, None, 5.0, 4.0, 9.0]})\n"
        "r, p = stats.pearsonr(df['Fare'], df['Age'])\nprint(round(r, 6))"
    )
    fixed = preflight(code, FACTS)
    assert "stats.pearsonr(*df[['Fare', 'Age']].dropna().to_numpy().T)" in fixed
    k = fresh_kernel(cwd=tmp_path)
    printed = "".join(o.get("text", "") for o in k.execute(fixed, timeout=60).outputs)
    pairs = pd.DataFrame({"f": [1.0, 3.0, 4.0, 5.0], "a": [2.0, 5.0, 4.0, 9.0]})
    assert printed == f"{round(pairs.corr().iloc[0, 1], 6)}\n", (fixed, printed)
    for kept in (
        "stats.pearsonr(a['x'], b['y'])",  # two frames: which rows pair is not known
        "stats.pearsonr(df['x'], df['x'])",
        "stats.pearsonr(x, y)",
        "stats.pearsonr(df['x'], df['y'], alternative='less')",
    ):
        assert preflight(kept, FACTS) == kept


def test_a_test_on_columns_with_missing_values_omits_them():
    code = (
        "t, p = stats.ttest_ind(a['x'], b['x'], equal_var=False)\nr = scipy.stats.spearmanr(u, v)"
    )
    assert preflight(code, FACTS) == (
        "t, p = stats.ttest_ind(a['x'], b['x'], equal_var=False, nan_policy='omit')\n"
        "r = scipy.stats.spearmanr(u, v, nan_policy='omit')"
    )
    assert preflight("stats.shapiro(x)", FACTS) == "stats.shapiro(x)"  # scipy unknown
    assert preflight("stats.shapiro(x)", FACTS, scipy="1.17.1") == (
        "stats.shapiro(x, nan_policy='omit')"
    )
    for kept in (
        "stats.pearsonr(x, y)",  # takes no nan_policy
        "stats.ttest_ind(x, y, nan_policy='raise')",
        "stats.ttest_ind(x, y, **kw)",
        "np.mean(x)",
    ):
        assert preflight(kept, FACTS, scipy="1.17.1") == kept


def test_a_part_of_the_one_date_column_is_read_from_it():
    facts = {"p.csv": FileFacts(columns=("Date Egg", "x"), dates={"Date Egg": "%m/%d/%y"})}
    code = "import pandas as pd\nd = df[df['Year'] == 2008]\nprint(d['month'].nunique())"
    assert preflight(code, facts) == (
        "import pandas as pd\n"
        "d = df[pd.to_datetime(df['Date Egg'], format='%m/%d/%y').dt.year == 2008]\n"
        "print(pd.to_datetime(d['Date Egg'], format='%m/%d/%y').dt.month.nunique())"
    )
    code = "import pandas as pd\nprint(w[w['x'] > 1].groupby(['Month', 'x'])['x'].sum())"
    assert preflight(code, facts) == (
        "import pandas as pd\nprint(w[w['x'] > 1].groupby([pd.to_datetime(w[w['x'] > 1]"
        "['Date Egg'], format='%m/%d/%y').dt.month.rename('Month'), 'x'])['x'].sum())"
    )
    for kept in (
        "d = df[df['Year'] == 2008]",  # pandas not imported as a name we can call
        "import pandas as pd\ndf['year'] = 1\nprint(df['Year'])",  # a column made
        "import pandas as pd\nprint(df['Years'])",  # not a part of a date
    ):
        assert preflight(kept, facts) == kept
    two = {"p.csv": FileFacts(columns=("a", "b"), dates={"a": "%Y-%m-%d", "b": "%Y-%m-%d"})}
    assert preflight("import pandas as pd\ndf['Year']", two) == "import pandas as pd\ndf['Year']"
    has = {"p.csv": FileFacts(columns=("Date", "year"), dates={"Date": "%Y-%m-%d"})}
    assert preflight("import pandas as pd\ndf['Year']", has) == "import pandas as pd\ndf['year']"


def test_a_weekday_is_read_with_the_name_pandas_keeps():
    """pandas 3 warns that ``.dt.dayofweek`` and ``.dt.weekday`` are going, and a warning on
    stderr keeps a printed slot out of the answer: the edit writes ``.dt.day_of_week``,
    and the edited code runs on a real frame with warnings as errors."""
    facts = {"p.csv": FileFacts(columns=("Date Egg", "x"), dates={"Date Egg": "%m/%d/%y"})}
    edited = preflight("import pandas as pd\nn = (df['weekday'] >= 5).sum()", facts)
    assert ".dt.day_of_week >= 5" in edited
    df = pd.DataFrame({"Date Egg": ["11/11/07", "11/10/07", "11/12/07"], "x": [1, 2, 3]})
    namespace: dict = {"df": df}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec(edited, namespace)  # noqa: S102 (the test is the kernel)
    assert namespace["n"] == 2  # 2007-11-10 and 11-11 were a Saturday and a Sunday


def test_numbers_stored_as_text_are_read_as_numbers_after_the_read_line():
    facts = {"s.csv": FileFacts(delimited=True, columns=("streams", "bpm"), numeric=("streams",))}
    code = "import pandas as pd\ndf = pd.read_csv('s.csv')\nprint(df['streams'].mean())"
    assert preflight(code, facts) == (
        "import pandas as pd\ndf = pd.read_csv('s.csv')\n"
        "df['streams'] = pd.to_numeric(df['streams'].astype(str)"
        ".str.replace(r'[,$€£%+\\s]', '', regex=True), errors='coerce')\n"
        "print(df['streams'].mean())"
    )
    for kept in (
        "df = pd.read_csv('s.csv')\ndf['streams'] = pd.to_numeric(df['streams'], errors='coerce')",
        "df = pd.read_csv('s.csv', thousands=',')",
        "def f():\n    df = pd.read_csv('s.csv')\n    return df",  # only a top-level read
        "df = read_csv('s.csv')",  # no module to call to_numeric on
    ):
        assert preflight(kept, facts) == kept


def test_to_datetime_of_a_date_column_gets_the_format_that_parses_it():
    assert preflight("df['Date Egg'] = pd.to_datetime(df['Date Egg'])", FACTS) == (
        "df['Date Egg'] = pd.to_datetime(df['Date Egg'], format='%m/%d/%y')"
    )
    assert preflight("w['d'] = pd.to_datetime(w['date'], format='%m/%d/%Y')", FACTS) == (
        "w['d'] = pd.to_datetime(w['date'], format='%d/%m/%Y')"
    )
    assert preflight("pd.to_datetime(df['date egg'])", FACTS) == (
        "pd.to_datetime(df['Date Egg'], format='%m/%d/%y')"
    )
    for kept in (
        "pd.to_datetime(w['date'], dayfirst=True)",
        "pd.to_datetime(w['date'], format='mixed')",
        "pd.to_datetime(w['wind'])",
    ):
        assert preflight(kept, FACTS) == kept


def test_a_numbered_column_of_a_headerless_file_is_not_quoted(kernel, kernel_workdir):
    """``filtered['0']`` on iris.data read with header=None: KeyError '0', four times."""
    facts = {"iris.data": FileFacts(headerless=True, columns=("0", "1", "2", "3", "4"))}
    code = (
        "df = pd.read_csv('iris.data', header=None)\nwide = df[df[3] > 1.5]\n"
        "print(len(wide), round(wide['0'].mean(), 2), df.groupby('4')[['1', '2']].mean().shape)"
    )
    fixed = preflight(code, facts)
    assert fixed == code.replace("'0'", "0").replace("'4'", "4").replace("['1', '2']", "[1, 2]")
    (kernel_workdir / "iris.data").write_text(
        "5.1,3.5,1.4,0.2,a\n6.3,3.3,6.0,2.5,b\n7.1,3.0,5.9,2.1,b\n"
    )
    run = kernel.execute("import pandas as pd\n" + fixed, timeout=30)
    assert run.ok and "".join(o.get("text", "") for o in run.outputs) == "2 6.7 (2, 2)\n"
    # a quoted number another file names, or no headerless file: left as written
    named = {**facts, "b.csv": FileFacts(columns=("0", "x"))}
    assert preflight("m = df['0'].mean()", named) == "m = df['0'].mean()"
    assert preflight("m = df['0'].mean()", {"b.csv": FileFacts(columns=("x",))}) == (
        "m = df['0'].mean()"
    )


def test_to_datetime_of_dates_written_as_numbers_reads_them_as_text(kernel):
    """20190314 as a number is 20190314 ns after 1970: every row on 1970-01-01."""
    facts = {"s.csv": FileFacts(columns=("date", "revenue"), dates={"date": "%Y%m%d"})}
    cells = {
        "df['date'] = pd.to_datetime(df['date'])": "pd.to_datetime(df['date'].astype(str), "
        "format='%Y%m%d')",
        "df['date'] = pd.to_datetime(df['date'], format='%Y%m%d')": "pd.to_datetime("
        "df['date'].astype(str), format='%Y%m%d')",
    }
    for code, fixed in cells.items():
        assert preflight(code, facts) == "df['date'] = " + fixed
    for kept in (
        "df['date'] = pd.to_datetime(df['date'].astype(str))",
        "x = pd.to_datetime(df['date'], unit='s')",
    ):
        assert preflight(kept, facts) == kept
    # seconds since 1970 get their unit, here and where a part of the date is asked
    seconds = {"c.csv": FileFacts(columns=("issued_at", "fine"), dates={"issued_at": "%s"})}
    assert preflight("t = pd.to_datetime(df['issued_at'])", seconds) == (
        "t = pd.to_datetime(df['issued_at'], unit='s')"
    )
    assert preflight(
        "import pandas as pd\nprint(df.groupby(df['month'])['fine'].sum())", seconds
    ) == (
        "import pandas as pd\nprint(df.groupby(pd.to_datetime(df['issued_at'], unit='s').dt.month)"
        "['fine'].sum())"
    )
    run = kernel.execute(
        "import pandas as pd\ndf = pd.DataFrame({'date': [20190314, 20190401]})\n"
        + preflight("df['date'] = pd.to_datetime(df['date'])", facts)
        + "\nprint(df['date'].dt.month.tolist())",
        timeout=30,
    )
    assert run.ok and "".join(o.get("text", "") for o in run.outputs) == "[3, 4]\n"


def test_an_answer_slot_written_as_code_becomes_its_print():
    code = "m = 2.5\n@mean_mass[m]\n@verdict[significant]\nfor i in [1]:\n    @n[len([1, i])]"
    fixed = preflight(code, {}, {"m": VariableInfo("m", "float")})
    assert fixed == (
        "m = 2.5\nprint('@mean_mass[' + str(m) + ']')\nprint('@verdict[significant]')\n"
        "for i in [1]:\n    print('@n[' + str(len([1, i])) + ']')"
    )
    assert preflight("x = 1\n@total[x + 1]", {}) == "x = 1\nprint('@total[' + str(x + 1) + ']')"
    valid = "@decorate[0]\ndef f():\n    pass"
    assert preflight(valid, {}) == valid  # Python: a real decorator
    broken = "@total[1]\nprint(("
    assert preflight(broken, {}) == broken  # still not Python once printed: left as written


def test_a_column_name_with_its_own_quote_in_it_is_written_as_python_writes_it():
    """``'Chiffre d'affaires (EUR)'``: four SyntaxErrors in a row, 2026-12-08."""
    facts = {"v.csv": FileFacts(sep=";", columns=("Région", "Chiffre d'affaires (EUR)"))}
    held = {"t": VariableInfo("t", "DataFrame", columns=('Say "hi"', "it's"))}
    code = """s = df.groupby('Région')['Chiffre d'affaires (EUR)'].sum()
print(s.idxmax(), s.max())
print(t["Say "hi""].sum(), t['it's'].mean())"""
    assert (
        preflight(code, facts, held)
        == """s = df.groupby('Région')["Chiffre d'affaires (EUR)"].sum()
print(s.idxmax(), s.max())
print(t['Say "hi"'].sum(), t["it's"].mean())"""
    )
    # a cell that parses, or that would not parse even so, is left as written
    for kept in ("""x = "Chiffre d'affaires (EUR)" """, "x = 'Chiffre d'affaires (EUR)' + ("):
        assert preflight(kept, facts, held) == kept
    # a quote of a name the data does not have is not guessed at
    assert preflight("df['Nom d'usage']", facts, held) == "df['Nom d'usage']"


@pytest.mark.parametrize(
    "stated",
    [
        "@anagrams[6]\n@arrangements[20324]",  # the bundled model's guess, 2026-12-07
        "# the answer\n@business_days[0]\n",
        "@verdict[significant] \n@p_value[-0.5]",
        "@city[New York]",
    ],
)
def test_a_cell_of_stated_values_only_is_left_as_an_answer(stated):
    """Printed, a value the model only states would pass for one a cell computed; left
    as written, prose_cell asks for it as text (tests/agent/levers/test_prose_cell.py)."""
    assert preflight(stated, {}) == stated
    # one slot that computes, or any line of code, makes it a cell to print
    assert preflight(stated + "\n@n[len(df)]", {}) != stated + "\n@n[len(df)]"
    assert "\nprint('@" in preflight("x = 2\n" + stated, {})
    # a name the kernel holds is a computed value
    held = {"arrangements": VariableInfo("arrangements", "int")}
    assert preflight("@arrangements[arrangements]", {}, held) == (
        "print('@arrangements[' + str(arrangements) + ']')"
    )


@pytest.mark.parametrize(
    "tail",
    [
        "not json",
        "[1, 2]",
        '{"a.csv": {"columns": "x"}}',
        '{"a.csv": {"columns": [1, 2], "read": {"sep": "x"}}}',
        '{"a.csv": {"columns": ["a"], "dates": {"a": "%Y; import os"}}}',
        '{"a.csv": {"columns": ["a"], "missing": {"a": "."}}}',
        '{"a.csv": {"columns": ["a"], "missing": {"b": ["."], "a": [1, "%s" * 20]}}}',
        '{"a.csv": {"columns": ["a"], "missing": [["a", "."]]}}',
        "[" * 100_000,
    ],
)
def test_facts_of_the_wrong_shape_from_a_kernel_are_dropped(tail):
    text, facts = split_facts("a.csv (1 KB)\n\x1e preview facts: " + tail)
    assert text == "a.csv (1 KB)"
    assert all(not f.columns or all(isinstance(c, str) for c in f.columns) for f in facts.values())
    assert all(not f.dates for f in facts.values())
    assert all(f.sep in ",;\t|" for f in facts.values())
    assert all(not f.missing for f in facts.values())  # not a list, no such column, too long


def test_a_read_call_reads_the_marks_a_column_writes_for_missing_values_as_missing():
    facts = {"p.csv": FileFacts(delimited=True, columns=("Sex", "x"), missing={"Sex": (".",)})}
    assert preflight("df = pd.read_csv('p.csv')", facts) == (
        "df = pd.read_csv('p.csv', na_values={'Sex': ['.']})"
    )
    for kept in (  # the cell says how it reads missing values itself
        "df = pd.read_csv('p.csv', na_values=['?'])",
        "df = pd.read_csv('p.csv', keep_default_na=False)",
    ):
        assert preflight(kept, facts) == kept


MESSY = {
    # a ;-separated latin-1 file with a decimal comma, spaced and dotted names, local dates
    "votes.csv": (
        "District ;avg. share;Date Vote\n"
        + "".join(f"D{i} ;{i},5;{i % 28 + 1:02d}/03/2019\n" for i in range(1, 40))
        + "Montréal ;9,25;13/03/2019\n"
    ).encode("latin-1"),
    # numbers with thousands separators, and one corrupt row that makes the column text
    "wind.txt": "day|Wind Speed (km/h)|Streams|Gust\n"
    + "".join(f"{i}|{i * 2}|{i * 1000:,}|{i}.5 km/h\n" for i in range(30))
    + "30|1|BPM110KeyAModeMajor|\n",
}


def test_real_preview_facts_make_a_models_cell_run_in_a_real_kernel(fresh_kernel, tmp_path):
    k = fresh_kernel(cwd=tmp_path)
    for name, body in MESSY.items():
        path = Path(k.kernel_cwd) / name
        path.write_bytes(body) if isinstance(body, bytes) else path.write_text(body)
    result = k.execute("", timeout=120, user_expressions={"p": data_preview_expression(facts=True)})
    text, facts = split_facts(parse_text_expression(result.user_expressions["p"]) or "")
    assert "preview facts" not in text and "votes.csv (" in text
    assert facts["votes.csv"].sep == ";" and facts["votes.csv"].encoding == "latin-1"
    assert facts["votes.csv"].decimal_comma and facts["votes.csv"].dates == {
        "Date Vote": "%d/%m/%Y"
    }
    assert facts["wind.txt"].sep == "|" and "Wind Speed (km/h)" in facts["wind.txt"].columns
    # what the bundled model writes first on such files: it fails as written
    cell = (
        "import pandas as pd\n"
        "v = pd.read_csv('votes.csv')\n"
        "v['date vote'] = pd.to_datetime(v['date vote'])\n"
        "w = pd.read_csv('wind.txt')\n"
        "print(v['avg share'].sum(), v['District'].iloc[-1], v['date vote'].dt.day.max(),\n"
        "      w['Wind Speed'].max(), w['streams'].sum(), w['gust'].max())\n"
    )
    assert not k.execute(cell, timeout=60).ok
    fixed = preflight(cell, facts)
    ran = k.execute(fixed, timeout=60)
    assert ran.ok, (fixed, ran.error)
    total = sum(i + 0.5 for i in range(1, 40)) + 9.25
    printed = "".join(o.get("text", "") for o in ran.outputs)
    streams = float(sum(i * 1000 for i in range(30)))
    assert printed == f"{total} Montréal  28 58 {streams} 29.5\n", fixed
    assert facts["wind.txt"].numeric == ("Streams",) and facts["votes.csv"].numeric == ()
    assert facts["wind.txt"].units == ("Gust",)
    assert "District " not in facts["votes.csv"].values  # 40 values: too many to list
    assert len(facts["votes.csv"].values["Date Vote"]) == 28


def test_marks_for_missing_values_the_preview_found_are_missing_in_a_real_kernel(
    fresh_kernel, tmp_path
):
    """The messy tuned half's question: how many penguins have no Sex recorded, where the
    file writes one as '.' (and others as nothing); the model's count read none of them."""
    k = fresh_kernel(cwd=tmp_path)
    rows = "".join(f"{i},{['MALE', 'FEMALE', '.', ''][i % 4]},{i}\n" for i in range(40))
    (Path(k.kernel_cwd) / "p.csv").write_text("id,Sex,Mass\n" + rows)
    result = k.execute("", timeout=120, user_expressions={"p": data_preview_expression(facts=True)})
    _, facts = split_facts(parse_text_expression(result.user_expressions["p"]) or "")
    assert facts["p.csv"].missing == {"Sex": (".",)}
    cell = "import pandas as pd\ndf = pd.read_csv('p.csv')\nprint(df['Sex'].isna().sum())"
    assert "".join(o.get("text", "") for o in k.execute(cell, timeout=60).outputs) == "10\n"
    ran = k.execute(preflight(cell, facts), timeout=60)
    assert "".join(o.get("text", "") for o in ran.outputs) == "20\n", ran.error


def test_an_integer_cast_of_a_column_with_gaps_keeps_them():
    facts = {"c.tsv": FileFacts(columns=("Horsepower", "Name", "n"), whole=("Horsepower",))}
    for cast in ("int", "'int'", "'int64'", "np.int32"):
        code = f"df['Horsepower'] = df['Horsepower'].astype({cast})"
        assert preflight(code, facts) == "df['Horsepower'] = df['Horsepower'].astype('Int64')"
    assert preflight("x = df[df.n > 1].Horsepower.astype(int)", facts) == (
        "x = df[df.n > 1].Horsepower.astype('Int64')"
    )
    for kept in (
        "df['Horsepower'].dropna().astype(int)",  # no gaps left to fail on
        "df['Horsepower'].fillna(0).astype(int)",
        "df['n'].astype(int)",  # a column with no gaps
        "df['Horsepower'].astype(float)",
        "df['Horsepower'].astype(int, copy=False)",  # arguments we do not rewrite
        "df.astype({'Horsepower': int})",
    ):
        assert preflight(kept, facts) == kept


def test_a_cast_of_a_column_with_gaps_runs_in_a_real_kernel(fresh_kernel, tmp_path):
    """The preview finds the gaps; the model's cast fails as written and runs corrected,
    and scipy reads the corrected column (its gap dropped)."""
    k = fresh_kernel(cwd=tmp_path)
    rows = "".join(f"car{i}\t{'' if i == 3 else 100 + i}\n" for i in range(12))
    (Path(k.kernel_cwd) / "cars.tsv").write_text("Name\tHorsepower\n" + rows)
    result = k.execute("", timeout=120, user_expressions={"p": data_preview_expression(facts=True)})
    _, facts = split_facts(parse_text_expression(result.user_expressions["p"]) or "")
    assert facts["cars.tsv"].whole == ("Horsepower",)
    cell = (
        "import pandas as pd\nfrom scipy import stats\n"
        "df = pd.read_csv('cars.tsv', sep='\\t')\n"
        "df['Horsepower'] = df['Horsepower'].astype(int)\n"
        "print(df['Horsepower'].sum(), stats.ttest_1samp(df['Horsepower'], 100).pvalue < 0.05)"
    )
    assert "IntCastingNaNError" in str(k.execute(cell, timeout=60).error)
    ran = k.execute(preflight(cell, facts, scipy="1.16"), timeout=60)
    assert ran.ok, ran.error
    assert (
        "".join(o.get("text", "") for o in ran.outputs)
        == f"{sum(100 + i for i in range(12)) - 103} True\n"
    )


def test_a_title_line_above_the_header_is_skipped_and_decimal_comma_money_is_read():
    facts = {
        "u.csv": FileFacts(
            delimited=True,
            sep=";",
            decimal_comma=True,
            skiprows=2,
            columns=("Datum", "Betrag"),
            numeric=("Betrag",),
        )
    }
    code = "import pandas as pd\ndf = pd.read_csv('u.csv', sep=';')\nprint(df['Betrag'].sum())"
    assert preflight(code, facts) == (
        "import pandas as pd\ndf = pd.read_csv('u.csv', sep=';', decimal=',', skiprows=2)\n"
        "df['Betrag'] = pd.to_numeric(df['Betrag'].astype(str)"
        ".str.replace(r'[.$€£%+\\s]', '', regex=True).str.replace(',', '.'), errors='coerce')\n"
        "print(df['Betrag'].sum())"
    )
    for told in ("skiprows=[0, 1]", "header=2", "header=[2, 3]"):
        kept = f"df = pd.read_csv('u.csv', sep=';', decimal=',', {told})"
        assert preflight(kept, facts).splitlines()[0] == kept
    # names for every column: the header is still the line after the title
    named = "df = pd.read_csv('u.csv', sep=';', decimal=',', names=['Datum', 'Betrag'])"
    assert preflight(named, facts).splitlines()[0] == named[:-1] + ", header=0, skiprows=2)"


def test_a_spaced_file_a_note_below_and_no_header_are_read_as_the_preview_read_them():
    spaced = {"a.csv": FileFacts(delimited=True, spaced=True, columns=("age", "workclass"))}
    code = "df = pd.read_csv('a.csv')"
    assert preflight(code, spaced) == "df = pd.read_csv('a.csv', skipinitialspace=True)"
    told = "df = pd.read_csv('a.csv', skipinitialspace=False)"
    assert preflight(told, spaced) == told
    noted = {"w.csv": FileFacts(delimited=True, skipfooter=2, columns=("Year", "Value"))}
    assert preflight("df = pd.read_csv('w.csv')", noted) == (
        "df = pd.read_csv('w.csv', skipfooter=2, engine='python')"
    )
    for kept in ("nrows=60", "engine='c'", "low_memory=False", "skipfooter=3"):
        line = f"df = pd.read_csv('w.csv', {kept})"
        assert preflight(line, noted) == line, kept  # the cell chose how to read it
    headless = {"i.data": FileFacts(delimited=True, headerless=True, columns=("0", "1", "2"))}
    assert preflight("df = pd.read_csv('i.data')", headless) == (
        "df = pd.read_csv('i.data', header=None)"
    )
    named = "df = pd.read_csv('i.data', header=None, names=['a', 'b', 'c'])"
    assert preflight(named, headless) == named  # no header line: None stays
    bare = "df = pd.read_csv('i.data', names=['a', 'b', 'c'])"
    assert preflight(bare, headless) == bare


def _euro(x: float) -> str:
    """1234.5 as a German export writes it: '1.234,50 €'."""
    return f"{x:,.2f}".replace(",", " ").replace(".", ",").replace(" ", ".") + " €"


# a European export: a title and a blank line above the header, ';', a decimal comma,
# a dot between thousands and a euro sign; dates as dd.mm.yyyy
EXPORT = "Umsatzbericht 2023 - exportiert am 05.01.2024\n\nDatum;Filiale;Betrag\n" + "".join(
    f"{i % 28 + 1:02d}.{i % 12 + 1:02d}.2023;{'Köln' if i % 3 else 'München'};{_euro(i * 250.5)}\n"
    for i in range(40)
)


def test_a_title_above_the_header_in_a_real_kernel(fresh_kernel, tmp_path):
    """From a scratch question (2026-12-07): the preview read the title as the only column
    and the bundled model gave up after four cells of KeyError: 'Betrag'."""
    k = fresh_kernel(cwd=tmp_path)
    (Path(k.kernel_cwd) / "umsatz.csv").write_text(EXPORT)
    result = k.execute("", timeout=120, user_expressions={"p": data_preview_expression(facts=True)})
    text, facts = split_facts(parse_text_expression(result.user_expressions["p"]) or "")
    assert "read it with: df = pd.read_csv('umsatz.csv', sep=';', decimal=',', skiprows=2)" in text
    assert facts["umsatz.csv"].skiprows == 2 and facts["umsatz.csv"].numeric == ("Betrag",)
    cell = (
        "import pandas as pd\ndf = pd.read_csv('umsatz.csv', sep=';')\n"
        "print(df[df['Filiale'] == 'München']['Betrag'].sum())\n"
    )
    assert not k.execute(cell, timeout=60).ok
    ran = k.execute(preflight(cell, facts), timeout=60)
    printed = "".join(o.get("text", "") for o in ran.outputs)
    expected = sum(i * 250.5 for i in range(40) if i % 3 == 0)
    assert ran.ok and float(printed) == pytest.approx(expected), (printed, ran.error)


def test_a_last_row_of_totals_is_dropped_after_the_read_unless_the_cell_names_it():
    facts = {
        "s.csv": FileFacts(
            delimited=True, columns=("Shop", "Sales"), numeric=("Sales",), total=("Shop", "Total")
        )
    }
    code = "import pandas as pd\nshops = pd.read_csv('s.csv')\nprint(shops['Sales'].mean())"
    assert preflight(code, facts).splitlines()[2:4] == [
        "shops = shops[shops['Shop'] != 'Total']",
        "shops['Sales'] = pd.to_numeric(shops['Sales'].astype(str)"
        ".str.replace(r'[,$€£%+\\s]', '', regex=True), errors='coerce')",
    ]
    told = "df = pd.read_csv('s.csv')\ndf = df[df['Shop'] != 'Total']\nprint(f'Total: {df.Sales.sum()}')"
    assert "df = df[df['Shop'] != 'Total']\ndf = df[" not in preflight(told, facts)
    converting = "df = pd.read_csv('s.csv', thousands=',')\nprint(f'Total: {df.Sales.sum()}')"
    assert preflight(converting, facts).splitlines()[1] == "df = df[df['Shop'] != 'Total']"


def test_an_explode_of_lists_written_as_text_reads_the_lists_first(fresh_kernel, tmp_path):
    """The scratch TMDB run (2026-12-07): ``df.explode('genres')`` of "[{'id': 1, 'name':
    'Drama'}]" texts exploded nothing and the mean vote of Drama films came out nan. In a
    real kernel, the cell preflight writes counts the films by each genre's name."""
    k = fresh_kernel(cwd=tmp_path)
    genres = [
        [{"id": 1, "name": "Drama"}],
        [{"id": 2, "name": "Comedy"}, {"id": 1, "name": "Drama"}],
    ]
    frame = pd.DataFrame({"genres": [str(g) for g in genres * 10], "vote": range(20)})
    frame.to_csv(Path(k.kernel_cwd) / "m.csv", index=False)
    result = k.execute("", timeout=120, user_expressions={"p": data_preview_expression(facts=True)})
    facts = split_facts(parse_text_expression(result.user_expressions["p"]) or "")[1]
    assert facts["m.csv"].lists == ("genres",)
    cell = (
        "import pandas as pd\ndf = pd.read_csv('m.csv')\nx = df.explode('genres')\n"
        "print(x[x['genres'] == 'Drama']['vote'].mean())"
    )
    fixed = preflight(cell, facts)
    assert fixed.startswith("import ast\n") and ".map(lambda s:" in fixed
    ran = k.execute(fixed, timeout=60)
    assert ran.ok and "".join(o.get("text", "") for o in ran.outputs) == f"{sum(range(20)) / 20}\n"
    for kept in (
        "df['genres'] = df['genres'].apply(ast.literal_eval)\nx = df.explode('genres')",
        "x = df.explode('other')",
        "x = df[df.vote > 1].explode('genres')",  # not a name: left as written
    ):
        assert preflight(kept, facts) == kept


def test_a_read_that_keeps_na_as_a_code_is_added_with_the_other_marks():
    """A drinks file's continent 'NA' (North America), which pandas reads as missing: the
    preview read it keeping the default texts; a cell's plain read gets the same options,
    with a column's own gap mark ('?') among the marks; a read that says how to treat
    missing texts is left alone."""
    facts = {
        "drinks.csv": FileFacts(
            delimited=True, kept=("",), columns=("continent", "beer"), missing={"beer": ("?",)}
        )
    }
    code = "df = pd.read_csv('drinks.csv')"
    assert preflight(code, facts) == (
        "df = pd.read_csv('drinks.csv', keep_default_na=False, na_values=['', '?'])"
    )
    for told in ("na_values=['x']", "keep_default_na=True"):
        kept = f"df = pd.read_csv('drinks.csv', {told})"
        assert preflight(kept, facts) == kept
