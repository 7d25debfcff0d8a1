"""Error hints for the model (pure units with hand-made results)."""

from __future__ import annotations

from datetime import datetime, timezone

from fake_openai import run_cell, scripted_settings, text

from kernel_agent.agent import Agent
from kernel_agent.agent.hints import error_hint
from kernel_agent.kernel_state.namespace import VariableInfo
from kernel_agent.results import CellError, CellResult

NOW = datetime.now(timezone.utc)


def failed(code: str, ename: str, evalue: str) -> CellResult:
    return CellResult(code, "error", 1, [], CellError(ename, evalue, []), NOW, NOW)


def test_self_referencing_assignment():
    code = "df = pd.DataFrame({'n': range(1, 11), 'square': df['n']**2})"
    hint = error_hint(failed(code, "NameError", "name 'df' is not defined"), {})
    assert "right-hand side of its own assignment" in hint


def test_missing_common_import():
    hint = error_hint(failed("plt.plot([1])", "NameError", "name 'plt' is not defined"), {})
    assert "import matplotlib.pyplot as plt" in hint


def test_unknown_name_lists_existing_variables():
    ns = {"sales": VariableInfo("sales", "DataFrame")}
    hint = error_hint(failed("print(total)", "NameError", "name 'total' is not defined"), ns)
    assert "no variable `total`" in hint and "sales" in hint


def test_key_error_names_the_close_column():
    ns = {"data": VariableInfo("data", "DataFrame", columns=("Value", "Region"))}
    hint = error_hint(failed("data['value'].mean()", "KeyError", "'value'"), ns)
    assert "data has a column 'Value'" in hint and "data['Value']" in hint


def test_key_error_lists_dataframe_columns():
    ns = {"df": VariableInfo("df", "DataFrame", columns=("Value", "Region"))}
    hint = error_hint(failed("df['amount'].mean()", "KeyError", "'amount'"), ns)
    assert "df has columns Value, Region" in hint and "case-sensitive" in hint


def test_missing_module_and_no_hint_for_other_errors():
    assert "not installed" in error_hint(
        failed("import seaborn", "ModuleNotFoundError", "No module named 'seaborn'"), {}
    )
    assert error_hint(failed("1/0", "ZeroDivisionError", "division by zero"), {}) == ""


def test_key_error_matches_a_column_written_without_its_spaces_and_symbols():
    ns = {"df": VariableInfo("df", "DataFrame", columns=("id", "row m/z", "label"))}
    hint = error_hint(failed("df['row_mz'].mean()", "KeyError", "'row_mz'"), ns)
    assert "df['row m/z']" in hint


def test_missing_module_names_what_the_kernel_has_and_never_pip():
    libraries = {"pandas": "2.2.3", "scipy": "1.14.1", "statsmodels": "0.14.4"}
    cell = failed("import sympy", "ModuleNotFoundError", "No module named 'sympy'")
    hint = error_hint(cell, {}, libraries)
    assert "'sympy' is not installed" in hint and "pandas, scipy, statsmodels" in hint
    assert "pip" not in hint


def test_an_answer_format_written_into_code_is_explained():
    code = "print(f'@mean[{m:.2f}]')\n@mean_price[m]"
    hint = error_hint(failed(code, "SyntaxError", "invalid syntax"), {})
    assert "`@mean_price[m]` is not Python" in hint and 'print(f"@mean_price[{m}]")' in hint
    plain = error_hint(failed("print(", "SyntaxError", "unexpected EOF"), {})
    assert "final answer" not in plain


def test_missing_module_under_an_install_policy_points_at_install_package():
    cell = failed("import sympy.abc", "ModuleNotFoundError", "No module named 'sympy'")
    hint = error_hint(cell, {}, {"pandas": "2.2.3"}, "any")
    assert "install_package('sympy')" in hint and "policy: any" in hint


def test_an_unpacking_error_names_what_the_function_returns():
    code = "chi2, p = stats.chi2_contingency(table)"
    hint = error_hint(failed(code, "ValueError", "too many values to unpack (expected 2)"), {})
    assert "chi2_contingency() returns 4 values: chi2, p, dof, expected" in hint


def test_unpacking_one_value_says_so_and_names_pearsonr_for_corr():
    code = "r, _ = df['a'].corr(df['b'], method='pearson')"
    err = "cannot unpack non-iterable float object"
    hint = error_hint(failed(code, "TypeError", err), {})
    assert "one float value, not a pair" in hint and "stats.pearsonr(a, b)" in hint
    other = error_hint(failed("a, b = df['x'].mean()", "TypeError", err), {})
    assert "one float value" in other and "pearsonr" not in other
    assert error_hint(failed("x = 1 + 'a'", "TypeError", "unsupported operand"), {}) == ""


def test_an_integer_key_error_on_a_frame_points_at_loc_and_iloc():
    ns = {"df": VariableInfo("df", "DataFrame", columns=("firm", "invest"))}
    hint = error_hint(failed("print(df[df['invest'].idxmax()])", "KeyError", "0"), ns)
    assert "frame.loc[0]" in hint and "frame.iloc[0]" in hint


def test_a_series_formatted_as_a_number_points_at_its_value():
    code = "pred = model.predict({'bmi': 30})\nprint(f'{pred:.2f}')"
    evalue = "unsupported format string passed to Series.__format__"
    hint = error_hint(failed(code, "TypeError", evalue), {})
    assert "is a Series" in hint and "x.iloc[0]" in hint


def test_abs_over_a_dicts_keys_points_at_its_values():
    code = "best = max(correlations, key=abs)\nprint(best)"
    hint = error_hint(failed(code, "TypeError", "bad operand type for abs(): 'str'"), {})
    assert "max(d, key=lambda k: abs(d[k]))" in hint
    assert (
        error_hint(failed("abs('x')", "TypeError", "bad operand type for abs(): 'str'"), {}) == ""
    )


def test_a_slot_line_written_as_code_gets_the_print_that_works():
    code = (
        "import pandas as pd\ndf = pd.read_csv('t.csv')\n@missing_values[df['Cabin'].isna().sum()]"
    )
    hint = error_hint(failed(code, "SyntaxError", "incomplete input"), {})
    line = "print(f\"@missing_values[{df['Cabin'].isna().sum()}]\")"
    assert line in hint
    df = _Frame()  # the printed line is Python and prints the slot
    out: list[str] = []
    exec(line, {"df": df, "print": out.append})
    assert out == ["@missing_values[3]"]
    quoted = error_hint(failed('  @n[len(df[df["a"] > 1])]  ', "SyntaxError", "x"), {})
    assert "print(f'@n[{len(df[df[\"a\"] > 1])}]')" in quoted
    inline = error_hint(failed("x = @n[3]", "SyntaxError", "invalid syntax"), {})
    assert 'print(f"@name[{value}]")' in inline


class _Frame:
    def __getitem__(self, key: str) -> _Frame:
        return self

    def isna(self) -> _Frame:
        return self

    def sum(self) -> int:
        return 3


def test_key_error_on_a_name_with_a_space_or_dot_gives_the_exact_spelling():
    ns = {"df": VariableInfo("df", "DataFrame", columns=(" Age", "Avg. Wait Time", "Sex"))}
    hint = error_hint(failed("df['Age'].mean()", "KeyError", "'Age'"), ns)
    assert "df[' Age']" in hint and "spelt exactly so" in hint
    hint = error_hint(failed("df['avg wait time']", "KeyError", "'avg wait time'"), ns)
    assert "df['Avg. Wait Time']" in hint


def test_a_one_column_frame_is_a_separator_read_wrong():
    told = ["chip.tsv (1 KB)\n  read it with: df = pd.read_csv('chip.tsv', sep='\\t')"]
    for column, sep in (("order_id\tquantity\titem", "\\t"), ("a;b;c", ";"), ("a|b", "|")):
        ns = {"df": VariableInfo("df", "DataFrame", columns=(column,))}
        hint = error_hint(failed("df['quantity'].sum()", "KeyError", "'quantity'"), ns, told=told)
        assert f"separated by {sep!r}" in hint and f"sep={sep!r}" in hint, hint
        assert "pd.read_csv('chip.tsv', sep='\\t')" in hint


def test_a_parser_or_decoding_error_points_at_the_previews_read_call():
    told = [
        "a.csv (1 KB)\n  read it with: df = pd.read_csv('a.csv', sep=';')\n"
        "b.csv (2 KB)\n  read it with: df = pd.read_csv('b.csv', encoding='latin-1')"
    ]
    err = "Error tokenizing data. C error: Expected 1 fields in line 3, saw 2"
    hint = error_hint(failed("df = pd.read_csv('a.csv')", "ParserError", err), {}, told=told)
    assert "sep=" in hint and "pd.read_csv('a.csv', sep=';')" in hint and "b.csv" not in hint
    err = "'utf-8' codec can't decode byte 0xe9 in position 5"
    hint = error_hint(failed("pd.read_csv('b.csv')", "UnicodeDecodeError", err), {}, told=told)
    assert "encoding='latin-1'" in hint and "pd.read_csv('b.csv', encoding='latin-1')" in hint


def test_text_for_numbers_says_how_to_convert():
    told = [
        "  ! 'streams' holds numbers stored as text (1 not numbers, e.g. 'BPM'): "
        "df['streams'] = pd.to_numeric(df['streams'], errors='coerce')"
    ]
    cases = [
        ("TypeError", "unsupported operand type(s) for /: 'str' and 'int'"),
        ("ValueError", "could not convert string to float: '1,234'"),
        ("TypeError", "ufunc 'isnan' not supported for the input types"),
        ("TypeError", "agg function failed [how->mean,dtype->object]"),
        ("TypeError", "operation 'truediv' not supported for dtype 'str' with dtype 'float64'"),
    ]
    for ename, evalue in cases:
        named = error_hint(failed("df['streams'].mean() / 2", ename, evalue), {}, told=told)
        assert "pd.to_numeric(df['streams'], errors='coerce')" in named, (ename, evalue)
        other = error_hint(failed("stats.ttest_ind(a, b)", ename, evalue), {}, told=told)
        assert "pd.to_numeric(df[c].astype(str).str.replace(',', '')" in other


def test_the_text_hint_names_the_column_the_error_is_about_before_one_the_cell_converted():
    """The held-out cars93 run (2026-12-07) converted Cylinders itself and divided
    EngineSize's '1.8 L' text by it; the hint quoted the Cylinders line, four times."""
    told = [
        "  ! 'Cylinders' holds numbers stored as text (1 not numbers, e.g. 'rotary'): "
        "df['Cylinders'] = pd.to_numeric(df['Cylinders'], errors='coerce')\n"
        "  ! 'EngineSize' holds numbers with text ('1.8 L', '3.2 L'); the first number: "
        "df['EngineSize'].astype(str).str.extract(r'(-?\\d+\\.?\\d*)')[0].astype(float)"
    ]
    code = (
        "df['Cylinders'] = pd.to_numeric(df['Cylinders'], errors='coerce')\n"
        "x = df['EngineSize'] / df['Cylinders']"
    )
    for ename, evalue in (
        ("TypeError", "operation 'truediv' not supported for dtype 'str' with dtype 'float64'"),
        ("ValueError", "could not convert string to float: '1.8 L'"),
    ):
        hint = error_hint(failed(code, ename, evalue), {}, told=told)
        assert "The data preview said: 'EngineSize' holds numbers with text" in hint, hint
    # a column the error quotes comes first, though the cell converts it too
    converted = code + "\ny = df['EngineSize'].astype(float)"
    hint = error_hint(
        failed(converted, "ValueError", "could not convert string to float: '1.8 L'"), {}, told=told
    )
    assert "'EngineSize' holds numbers with text" in hint


def test_an_int_cast_of_missing_values_says_dropna_or_int64():
    for ename, evalue in (
        ("IntCastingNaNError", "Cannot convert non-finite values (NA or inf) to integer"),
        (
            "ValueError",
            "cannot convert float NaN to integer: non-finite values (NA or inf) to integer",
        ),
    ):
        hint = error_hint(failed("df['a'].astype(int)", ename, evalue), {})
        assert ".dropna()" in hint and "'Int64'" in hint


def test_all_nan_or_empty_values_say_to_print_each_steps_size():
    for evalue in (
        "Encountered all NA values",
        "attempt to get argmax of an empty sequence",
        "zero-size array to reduction operation maximum which has no identity",
    ):
        hint = error_hint(failed("s.idxmax()", "ValueError", evalue), {})
        assert "Print len() and .head() of each step" in hint, evalue
    assert error_hint(failed("x", "ValueError", "math domain error"), {}) == ""


def test_two_selections_combined_on_the_index_say_to_put_them_side_by_side():
    """``s[mask1] - s[mask2]`` aligns on the row index: all NaN, then idxmax fails."""
    for code in (
        "df['gain'] = df['lifeExp'][df['year'] == 2007] - df['lifeExp'][df['year'] == 1952]",
        "g = df.loc[df.year == 2007, 'x'] - df.loc[df.year == 1952, 'x']\ng.idxmax()",
        "r = df[df['y'] > 2000]['v'] / df[df['y'] <= 2000]['v']",
    ):
        hint = error_hint(failed(code, "ValueError", "Encountered all NA values"), {})
        assert "pairs rows by their index" in hint and "pivot_table" in hint, code
    for code in (  # by position (numpy), or a statistic of one selection: the general hint
        "g = df.loc[df.year == 2007, 'x'].values - df.loc[df.year == 1952, 'x'].values",
        "d = df[df.a > 1]['x'].mean() - df['x'].mean()",
        "d = df['a'] - df['b']",
    ):
        hint = error_hint(failed(code, "ValueError", "Encountered all NA values"), {})
        assert "Print len() and .head() of each step" in hint, code


def test_a_row_number_from_idxmax_used_as_a_date_says_to_look_the_row_up():
    """The follow-up tuned half: ``econ['unemploy'].idxmax().strftime(...)`` on a frame
    indexed by row numbers (AttributeError), then the row number printed as the month."""
    code = "m = econ['unemploy'].idxmax()\nprint(m.strftime('%Y-%m'))"
    for evalue in (
        "'int' object has no attribute 'strftime'",
        "'numpy.int64' object has no attribute 'year'",
    ):
        hint = error_hint(failed(code, "AttributeError", evalue), {})
        assert "Look the row up by it" in hint and ".loc[" in hint, evalue
    other = "m = econ['unemploy'].max()\nprint(m.strftime('%Y-%m'))"
    assert "idxmax" not in error_hint(failed(other, "AttributeError", evalue), {})


def test_a_key_error_names_every_misspelt_column_of_the_cell_at_once():
    columns = ("Species ", "Island", "Delta 15 N (o/oo)", "Flipper Length (mm)")
    ns = {"df": VariableInfo("df", "DataFrame", columns=columns)}
    code = (
        "a = df[(df['Species'] == 'Adelie') & (df['Island'] == 'Dream')]\n"
        "stats.ttest_ind(a['Delta 15 N'], a[\"Flipper Length\"])"
    )
    hint = error_hint(failed(code, "KeyError", "'Species'"), ns)
    assert "df['Species ']" in hint
    assert "'Delta 15 N' is 'Delta 15 N (o/oo)'" in hint
    assert "'Flipper Length' is 'Flipper Length (mm)'" in hint
    assert "'Adelie'" not in hint and "'Dream'" not in hint and "'Island' is" not in hint


def test_a_date_parse_error_points_at_the_previews_date_format():
    told = [
        "  ! 'date' holds dates as text (e.g. '01/01/2012'): "
        "df['date'] = pd.to_datetime(df['date'], format='%d/%m/%Y')"
    ]
    err = 'time data "13/01/2012" doesn\'t match format "%m/%d/%Y", at position 12.'
    hint = error_hint(failed("df['date'] = pd.to_datetime(df['date'])", "ValueError", err), {},
                      told=told)  # fmt: skip
    assert "format='%d/%m/%Y'" in hint and "The data preview said" in hint
    alone = error_hint(failed("pd.to_datetime(s)", "DateParseError", "month must be in 1..12"), {})
    assert "dayfirst=True" in alone


def test_dt_on_dates_as_text_gets_the_previews_parse_line_not_a_number_fix():
    """The scratch Netflix run (2026-12-07): `.dt.year` on 'September 9, 2019' text; with
    no date hint the model took the preview's first-number fix for another column, got the
    day of the month and counted 2019 as 19."""
    told = [
        "  ! 'date_added' holds dates as text (e.g. 'October 25, 2020'): df['date_added'] = "
        "pd.to_datetime(df['date_added'].str.strip(), format='%B %d, %Y')\n"
        "  ! 'duration' holds numbers with text ('5 Seasons', '76 min'); the first number: ..."
    ]
    err = "Can only use .dt accessor with datetimelike values"
    code = "df['year'] = df['date_added'].dt.year"
    hint = error_hint(failed(code, "AttributeError", err), {}, told=told)
    assert "holds dates as text" in hint and "format='%B %d, %Y'" in hint
    assert "duration" not in hint and "first number" not in hint
    alone = error_hint(failed(code, "AttributeError", err), {})
    assert "pd.to_datetime" in alone


def test_a_misspelt_name_gets_the_one_the_cell_assigns():
    code = "full_professors = df[df['rank'] == 'Prof']\nq3 = full_professor['salary'].quantile(.75)"
    ns = {"df": VariableInfo("df", "DataFrame", columns=("rank", "salary"))}
    hint = error_hint(failed(code, "NameError", "name 'full_professor' is not defined"), ns)
    assert "`full_professors` does" in hint and "`full_professor`" in hint


def test_a_misspelt_name_gets_the_one_the_kernel_has():
    ns = {"monthly_totals": VariableInfo("monthly_totals", "Series")}
    hint = error_hint(
        failed("monthly_total.max()", "NameError", "name 'monthly_total' is not defined"), ns
    )
    assert "`monthly_totals` does" in hint


def test_a_name_near_two_others_gets_the_list_not_a_guess():
    ns = {n: VariableInfo(n, "int") for n in ("total_a", "total_b")}
    hint = error_hint(failed("print(total_c)", "NameError", "name 'total_c' is not defined"), ns)
    assert "Variables that exist: total_a, total_b" in hint and "does (one spelling" not in hint


def test_a_name_far_from_every_other_gets_the_list():
    ns = {"sales": VariableInfo("sales", "DataFrame")}
    hint = error_hint(failed("print(outliers)", "NameError", "name 'outliers' is not defined"), ns)
    assert "one spelling apart" not in hint and "sales" in hint


PREVIEW = (
    "salaries.csv (14.4 KB)\n  397 rows x 6 columns\n"
    "  columns: 'rank' str, 'discipline' str, 'salary' str\n"
)


def test_a_key_error_from_a_read_that_skipped_the_header_says_to_read_it_plainly():
    code = "df = pd.read_csv('salaries.csv', skiprows=1)\ndf['salary'].mean()"
    ns = {"df": VariableInfo("df", "DataFrame", columns=("Prof", "B", "$139,750"))}
    hint = error_hint(failed(code, "KeyError", "'salary'"), ns, told=[PREVIEW])
    assert "`skiprows=`" in hint and "a row of data became the column names" in hint
    assert "`df = pd.read_csv('salaries.csv')`" in hint


def test_a_lost_column_keeps_the_reads_other_options_or_quotes_the_previews_read():
    code = "df = pd.read_csv('s.tsv', sep='\\t', usecols=['rank'])\ndf['salary']"
    ns = {"df": VariableInfo("df", "DataFrame", columns=("rank",))}
    told = PREVIEW.replace("salaries.csv", "s.tsv")
    hint = error_hint(failed(code, "KeyError", "'salary'"), ns, told=[told])
    assert "`usecols=`" in hint and "pd.read_csv('s.tsv', sep='\\t')" in hint
    quoted = told + "  read it with: df = pd.read_csv('s.tsv', sep='\\t', encoding='latin-1')\n"
    hint = error_hint(failed(code, "KeyError", "'salary'"), ns, told=[quoted])
    assert "`df = pd.read_csv('s.tsv', sep='\\t', encoding='latin-1')`" in hint


def test_a_key_error_on_a_column_the_preview_does_not_list_is_not_blamed_on_the_read():
    code = "df = pd.read_csv('salaries.csv', skiprows=1)\ndf['wage']"
    ns = {"df": VariableInfo("df", "DataFrame", columns=("Prof", "B"))}
    hint = error_hint(failed(code, "KeyError", "'wage'"), ns, told=[PREVIEW])
    assert "skiprows" not in hint


def test_conditions_joined_against_precedence_get_the_fix_whatever_pandas_said():
    """pandas words the same slip three ways (texts from a real kernel, pandas 2)."""
    for code, ename, evalue in [
        ("d = df[df.x > 1 & df.x < 5]", "ValueError",
         "The truth value of a Series is ambiguous. Use a.empty, a.bool(), a.item()"),
        ("d = df[df.rank == 'Prof' & df.salary < 5]", "TypeError",
         "Cannot perform 'rand_' with a dtyped [int64] array and scalar of type [bool]"),
        ("d = df[df.x > 1 | df.rank == 'A']", "TypeError",
         "unsupported operand type(s) for |: 'int' and 'method'"),
    ]:  # fmt: skip
        hint = error_hint(failed(code, ename, evalue), {})
        assert hint.startswith("Hint: Python reads") and "&` and `|` bind tighter" in hint
    hint = error_hint(failed("d = df[(df.x > 1) and (df.x < 5)]", "ValueError",
                             "The truth value of a Series is ambiguous."), {})  # fmt: skip
    assert "`(df.x > 1) & (df.x < 5)`" in hint


def test_an_ambiguous_mask_without_a_slip_gets_the_rule_and_other_type_errors_nothing_new():
    hint = error_hint(failed("if df.x > 1:\n    pass", "ValueError",
                             "The truth value of a Series is ambiguous."), {})  # fmt: skip
    assert "`&` and `|`" in hint and ".any()" in hint
    plain = failed("y = x | 2", "TypeError", "unsupported operand type(s) for |: 'str' and 'int'")
    assert "Python reads" not in error_hint(plain, {})


def test_a_memory_error_says_to_count_without_listing():
    """A generic question: `len(list(permutations('MISSISSIPPI')))` ran out of memory, and
    the bundled model sent the cell back four times (2026-12-07)."""
    code = "print(len(list(permutations('MISSISSIPPI'))))"
    hint = error_hint(failed(code, "MemoryError", ""), {})
    assert "without listing each one" in hint and "math.factorial" in hint


def test_delim_whitespace_refused_by_pandas_3_points_at_the_separator():
    code = "df = pd.read_csv('wind.data', delim_whitespace=True)"
    evalue = "read_csv() got an unexpected keyword argument 'delim_whitespace'"
    hint = error_hint(failed(code, "TypeError", evalue), {})
    assert "sep=r'\\s+'" in hint


def test_a_column_an_earlier_cell_added_and_a_new_read_dropped_says_not_to_read_again():
    """The held-out follow-up chain (2026-12-07): the second question's cell read cars.tsv
    into df again, then used model_year, which the first question's cell had added."""
    before = {
        "df": VariableInfo("df", "DataFrame", columns=("Name", "Year", "model_year")),
    }
    code = (
        "import pandas as pd\ndf = pd.read_csv('cars.tsv', sep='\\t')\n"
        "recent4 = df[(df['model_year'] >= 1976) & (df['Cylinders'] == 4)]"
    )
    after = {"df": VariableInfo("df", "DataFrame", columns=("Name", "Year"))}
    made = "df['model_year'] = pd.to_datetime(df['Year']).dt.year"
    earlier = ["import pandas as pd\ndf = pd.read_csv('cars.tsv', sep='\\t')\n" + made, "x = 1"]
    hint = error_hint(
        failed(code, "KeyError", "'model_year'"), after, before=before, earlier=earlier
    )
    assert hint.startswith("Hint: 'model_year' is a column an earlier cell gave df")
    assert "df = pd.read_csv('cars.tsv'" in hint and f"(`{made}`)" in hint
    unmade = error_hint(failed(code, "KeyError", "'model_year'"), after, before=before)
    assert "Compute it again as the earlier cell did" in unmade  # no line found
    # no earlier frame had it, or this cell did not read into that frame: the usual hints
    for old, kept in ((before, code.replace("df = pd", "cars = pd")), ({}, code)):
        other = error_hint(failed(kept, "KeyError", "'model_year'"), after, before=old)
        assert "earlier cell" not in other


def test_a_follow_up_that_reads_the_file_again_is_told_its_column_was_dropped(fake_llm, tmp_path):
    """On a real kernel, two questions in one session: the first adds model_year to df;
    the second's cell reads the file into df again and fails on model_year. The hint the
    model gets names the read that dropped it."""
    (tmp_path / "cars.csv").write_text("Year,Cylinders\n" + "1976-01-01,4\n1970-01-01,8\n" * 5)
    first = (
        "import pandas as pd\ndf = pd.read_csv('cars.csv')\n"
        "df['model_year'] = pd.to_datetime(df['Year']).dt.year\nprint(df['model_year'].nunique())"
    )
    again = (
        "import pandas as pd\ndf = pd.read_csv('cars.csv')\n"
        "print(f\"@cars[{len(df[df['model_year'] >= 1976])}]\")"
    )
    fixed = (
        "df['model_year'] = pd.to_datetime(df['Year'], format='%Y-%m-%d').dt.year\n"
        "print(f\"@cars[{len(df[df['model_year'] >= 1976])}]\")"
    )
    fake_llm.enqueue(run_cell(first), text("There are 2 model years."))
    fake_llm.enqueue(run_cell(again), run_cell(fixed))
    with Agent(scripted_settings(fake_llm, tmp_path, clean_notebook=False)) as agent:
        agent.run_to_end("Using the file cars.csv: add model_year, the year of Year. How many?")
        result = agent.run_to_end("How many cars are from 1976 or later? @cars[integer]")
    told = fake_llm.requests[3].last_user_text
    assert "is a column an earlier cell gave df" in told
    made = "df['model_year'] = pd.to_datetime(df['Year'], format='%Y-%m-%d').dt.year"
    assert f"Make it again as the earlier cell did (`{made}`)" in told
    assert result.answer == "@cars[5]"
    fake_llm.assert_drained()
