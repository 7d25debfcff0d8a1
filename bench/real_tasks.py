"""The analysis eval's real-data half: questions over public datasets that ship inside
installed packages (statsmodels' datasets, scikit-learn's bundled CSV files), so nothing
is downloaded.

Each dataset is exported to one CSV file in the task's work dir; every answer is computed
here with pandas, numpy and scipy from the file as it is read back. The tasks alternate
between the ``tuned`` and ``held-out`` halves within each category, as the synthetic ones
do (``analysis_tasks.py``), and are scored by the same strict scorer.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from analysis_tasks import E, Expected, Task, with_halves
from scipy import stats

__all__ = ["REAL_DATASETS", "REAL_TASKS", "real_frame", "write_real_dataset"]


# ------------------------------------------------------------------ data
def _statsmodels(name: str) -> pd.DataFrame:
    module = importlib.import_module(f"statsmodels.datasets.{name}")
    return module.load_pandas().data.copy()


def _macrodata() -> pd.DataFrame:
    d = _statsmodels("macrodata")
    return d.astype({"year": int, "quarter": int})


def _longley() -> pd.DataFrame:
    return _statsmodels("longley").astype({"YEAR": int})


def _grunfeld() -> pd.DataFrame:
    return _statsmodels("grunfeld").astype({"year": int})


def _statecrime() -> pd.DataFrame:
    d = _statsmodels("statecrime")
    return d.rename_axis("state").reset_index()


def _sunspots() -> pd.DataFrame:
    return _statsmodels("sunspots").astype({"YEAR": int})


def _nile() -> pd.DataFrame:
    return _statsmodels("nile").astype({"year": int})


def _sklearn(loader: str, target: str, **kw: object) -> pd.DataFrame:
    datasets = importlib.import_module("sklearn.datasets")
    bunch = getattr(datasets, loader)(as_frame=True, **kw)
    d = bunch.frame.copy()
    if target:
        names = list(bunch.target_names)
        d[target] = [names[i] for i in d.pop("target")]
    return d


#: dataset name -> (file name, loader); every loader reads files shipped in a package
REAL_DATASETS: dict[str, tuple[str, Callable[[], pd.DataFrame]]] = {
    "macrodata": ("macrodata.csv", _macrodata),
    "longley": ("longley.csv", _longley),
    "grunfeld": ("grunfeld.csv", _grunfeld),
    "fair": ("fair.csv", lambda: _statsmodels("fair")),
    "statecrime": ("statecrime.csv", _statecrime),
    "sunspots": ("sunspots.csv", _sunspots),
    "nile": ("nile.csv", _nile),
    "engel": ("engel.csv", lambda: _statsmodels("engel")),
    "iris": ("iris.csv", lambda: _sklearn("load_iris", "species")),
    "wine": ("wine.csv", lambda: _sklearn("load_wine", "class")),
    "diabetes": ("diabetes.csv", lambda: _sklearn("load_diabetes", "", scaled=False)),
    "breast_cancer": ("breast_cancer.csv", lambda: _sklearn("load_breast_cancer", "diagnosis")),
}


def real_frame(name: str) -> pd.DataFrame:
    """The dataset as the package ships it (before the CSV round trip)."""
    return REAL_DATASETS[name][1]()


def write_real_dataset(name: str, folder: Path) -> tuple[Path, pd.DataFrame]:
    """Export the dataset to ``folder`` as CSV; the frame as pandas reads it back."""
    file, _ = REAL_DATASETS[name]
    path = folder / file
    real_frame(name).to_csv(path, index=False)
    return path, pd.read_csv(path)


# ------------------------------------------------------------------ answers
def _ols(d: pd.DataFrame, y: str, xs: list[str]) -> tuple[np.ndarray, float]:
    design = np.column_stack([np.ones(len(d)), d[xs].to_numpy(float)])
    target = d[y].to_numpy(float)
    coef, *_ = np.linalg.lstsq(design, target, rcond=None)
    resid = target - design @ coef
    return coef, float(1 - (resid**2).sum() / ((target - target.mean()) ** 2).sum())


def _fences(s: pd.Series) -> tuple[float, float]:
    q1, q3 = s.quantile(0.25), s.quantile(0.75)
    return q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)


def _outliers(s: pd.Series) -> int:
    low, high = _fences(s)
    return int(((s < low) | (s > high)).sum())


def _by(d: pd.DataFrame, key: str | pd.Series, col: str, how: str = "mean") -> pd.Series:
    return d.groupby(key)[col].agg(how)


def _best(s: pd.Series, key: str, value: str, decimals: int, low: bool = False,
          key_decimals: int | None = None) -> list[Expected]:  # fmt: skip
    """The label of the largest (or smallest) value of ``s``, and that value."""
    label = s.idxmin() if low else s.idxmax()
    name = E(key, label, key_decimals) if key_decimals is not None else E(key, str(label))
    return [name, E(value, s.loc[label], decimals)]


def _growth(s: pd.Series) -> pd.Series:
    return 100 * s.pct_change()


def _gdp_growth(d: pd.DataFrame) -> list[Expected]:
    growth = _growth(d["realgdp"])
    i = growth.idxmin()
    return [E("year", d.loc[i, "year"], 0), E("quarter", d.loc[i, "quarter"], 0),
            E("growth", growth[i])]  # fmt: skip


def _gm_growth(d: pd.DataFrame) -> list[Expected]:
    gm = d[d["firm"] == "General Motors"].sort_values("year").reset_index(drop=True)
    growth = _growth(gm["invest"])
    i = growth.idxmax()
    return [E("year", gm.loc[i, "year"], 0), E("change", growth[i])]


def _nile_rolling(d: pd.DataFrame) -> list[Expected]:
    s = d.sort_values("year").set_index("year")["volume"].rolling(10).mean()
    return [E("max_rolling_mean", s.max()), E("year", s.idxmax(), 0)]


def _decade(years: pd.Series) -> pd.Series:
    return (years // 10) * 10


def _age_group(age: pd.Series) -> pd.Series:
    return pd.cut(age, [-np.inf, 39.999, 59.999, np.inf], labels=["under 40", "40-59", "60+"])


def _welch(a: pd.Series, b: pd.Series) -> tuple[float, float]:
    r = stats.ttest_ind(a, b, equal_var=False)
    return float(r.statistic), float(r.pvalue)


def _mal(d: pd.DataFrame, col: str) -> tuple[pd.Series, pd.Series]:
    return d.loc[d.diagnosis == "malignant", col], d.loc[d.diagnosis == "benign", col]


_TASKS: list[Task] = [
    # ---------------------------------------------------------------- summary
    Task("real-macro-tbill", "macrodata", "summary",
         "What are the mean and the maximum of tbilrate over all quarters, rounded to 2 decimal places?",
         lambda d: [E("mean_tbilrate", d["tbilrate"].mean()), E("max_tbilrate", d["tbilrate"].max())],
         slots=False),
    Task("real-diab-summary", "diabetes", "summary",
         "What is the median bmi, and the sample standard deviation (ddof=1) of target? Round both to 2 decimal places.",
         lambda d: [E("median_bmi", d["bmi"].median()), E("std_target", d["target"].std())]),
    Task("real-bc-malignant", "breast_cancer", "summary",
         "How many tumours have the diagnosis malignant, and what is the mean of the column 'mean radius' over those tumours, rounded to 3 decimal places?",
         lambda d: [E("malignant", (d.diagnosis == "malignant").sum(), 0),
                    E("mean_radius", d.loc[d.diagnosis == "malignant", "mean radius"].mean(), 3)],
         slots=False),
    Task("real-state-murder", "statecrime", "summary",
         "Which state has the highest murder rate (column murder), and what is the mean murder rate over all states, rounded to 3 decimal places?",
         lambda d: [E("state", d.loc[d["murder"].idxmax(), "state"]),
                    E("mean_murder", d["murder"].mean(), 3)]),
    Task("real-fair-summary", "fair", "summary",
         "How many women in the file have children greater than 0, and what is their mean yrs_married, rounded to 2 decimal places?",
         lambda d: [E("with_children", (d["children"] > 0).sum(), 0),
                    E("mean_yrs_married", d.loc[d["children"] > 0, "yrs_married"].mean())],
         slots=False),
    # ---------------------------------------------------------------- group-by
    Task("real-macro-unemp-year", "macrodata", "group-by",
         "Which year had the highest average unemployment rate (column unemp, averaged over the year's quarters), and what was that average, rounded to 2 decimals?",
         lambda d: _best(_by(d, "year", "unemp"), "year", "mean_unemp", 2, key_decimals=0)),
    Task("real-grunfeld-top-firm", "grunfeld", "group-by",
         "Which firm has the highest total invest summed over all its years, and what is that total, rounded to 2 decimal places?",
         lambda d: _best(_by(d, "firm", "invest", "sum"), "firm", "total_invest", 2),
         slots=False),
    Task("real-fair-rating", "fair", "group-by",
         "Group the women by rate_marriage. Which rating has the highest mean of affairs, and what is that mean, rounded to 3 decimal places?",
         lambda d: _best(_by(d, "rate_marriage", "affairs"), "rate_marriage", "mean_affairs", 3,
                         key_decimals=0)),
    Task("real-iris-petal", "iris", "group-by",
         "Which species has the largest mean petal length (cm), and what is that mean, rounded to 3 decimal places?",
         lambda d: _best(_by(d, "species", "petal length (cm)"), "species", "mean_petal_length", 3),
         slots=False),
    Task("real-wine-proline", "wine", "group-by",
         "Which class has the highest mean proline, and what is that mean, rounded to 2 decimal places?",
         lambda d: _best(_by(d, "class", "proline"), "class", "mean_proline", 2)),
    # ---------------------------------------------------------------- correlation
    Task("real-macro-infl-unemp", "macrodata", "correlation",
         "What is the Pearson correlation between infl and unemp over all quarters, rounded to 3 decimal places? How many quarters does the file hold?",
         lambda d: [E("correlation", d["infl"].corr(d["unemp"]), 3), E("quarters", len(d), 0)]),
    Task("real-longley-corr", "longley", "correlation",
         "Among GNPDEFL, GNP, UNEMP, ARMED and POP, which column has the strongest Pearson correlation with TOTEMP (by absolute value), and what is that correlation, rounded to 4 decimal places?",
         lambda d: [E("column", d[["GNPDEFL", "GNP", "UNEMP", "ARMED", "POP"]].corrwith(d["TOTEMP"]).abs().idxmax()),
                    E("correlation", d[["GNPDEFL", "GNP", "UNEMP", "ARMED", "POP"]].corrwith(d["TOTEMP"]).abs().max(), 4)],
         slots=False),
    Task("real-fair-spearman", "fair", "correlation",
         "What is the Spearman rank correlation between yrs_married and affairs, rounded to 3 decimal places, and the Pearson correlation between age and yrs_married, rounded to 3 decimal places?",
         lambda d: [E("spearman", stats.spearmanr(d["yrs_married"], d["affairs"])[0], 3),
                    E("pearson", d["age"].corr(d["yrs_married"]), 3)]),
    Task("real-wine-corr", "wine", "correlation",
         "What is the Pearson correlation between alcohol and color_intensity, and between flavanoids and total_phenols? Round both to 3 decimal places.",
         lambda d: [E("alcohol_color", d["alcohol"].corr(d["color_intensity"]), 3),
                    E("flavanoids_phenols", d["flavanoids"].corr(d["total_phenols"]), 3)],
         slots=False),
    Task("real-bc-spearman", "breast_cancer", "correlation",
         "What is the Spearman rank correlation between 'mean radius' and 'mean texture', and the Pearson correlation between 'mean radius' and 'mean smoothness'? Round both to 3 decimal places.",
         lambda d: [E("spearman", stats.spearmanr(d["mean radius"], d["mean texture"])[0], 3),
                    E("pearson", d["mean radius"].corr(d["mean smoothness"]), 3)]),
    Task("real-state-corr", "statecrime", "correlation",
         "What is the Pearson correlation between poverty and hs_grad, rounded to 3 decimal places? How many states (rows) are in the file?",
         lambda d: [E("correlation", d["poverty"].corr(d["hs_grad"]), 3), E("states", len(d), 0)],
         slots=False),
    # ---------------------------------------------------------------- hypothesis test
    Task("real-fair-welch", "fair", "hypothesis test",
         "Compare affairs between women with children (children > 0) and women without (children == 0) with Welch's t-test (unequal variances), the group with children first. Report the t statistic and the p-value, rounded to 4 decimal places.",
         lambda d: [E("t_statistic", _welch(d.loc[d.children > 0, "affairs"], d.loc[d.children == 0, "affairs"])[0], 4),
                    E("p_value", _welch(d.loc[d.children > 0, "affairs"], d.loc[d.children == 0, "affairs"])[1], 4)]),
    Task("real-iris-anova", "iris", "hypothesis test",
         "Run a one-way ANOVA of sepal width (cm) across the three species. Report the F statistic rounded to 2 decimal places, and whether the species differ significantly at the 0.05 level (yes/no).",
         lambda d: [E("f_statistic", stats.f_oneway(*[g["sepal width (cm)"] for _, g in d.groupby("species")])[0]),
                    E("significant", "yes" if stats.f_oneway(*[g["sepal width (cm)"] for _, g in d.groupby("species")])[1] < 0.05 else "no")],
         slots=False),
    Task("real-wine-kruskal", "wine", "hypothesis test",
         "Run a Kruskal-Wallis H test of ash across the three classes. Report the H statistic and the p-value, both rounded to 4 decimal places.",
         lambda d: [E("h_statistic", stats.kruskal(*[g["ash"] for _, g in d.groupby("class")])[0], 4),
                    E("p_value", stats.kruskal(*[g["ash"] for _, g in d.groupby("class")])[1], 4)]),
    Task("real-diab-sex-ttest", "diabetes", "hypothesis test",
         "Compare target between sex 1 and sex 2 with a two-sample Student's t-test assuming equal variances (sex 1 first). Report the t statistic and the p-value, rounded to 4 decimal places.",
         lambda d: [E("t_statistic", stats.ttest_ind(d.loc[d.sex == 1, "target"], d.loc[d.sex == 2, "target"]).statistic, 4),
                    E("p_value", stats.ttest_ind(d.loc[d.sex == 1, "target"], d.loc[d.sex == 2, "target"]).pvalue, 4)],
         slots=False),
    Task("real-bc-mannwhitney", "breast_cancer", "hypothesis test",
         "Compare 'mean fractal dimension' between malignant and benign tumours with a two-sided Mann-Whitney U test (scipy's mannwhitneyu, malignant first). Report the U statistic rounded to 1 decimal place and the p-value rounded to 4 decimal places.",
         lambda d: [E("u_statistic", stats.mannwhitneyu(*_mal(d, "mean fractal dimension"))[0], 1),
                    E("p_value", stats.mannwhitneyu(*_mal(d, "mean fractal dimension"))[1], 4)]),
    # ---------------------------------------------------------------- regression
    Task("real-macro-cons-ols", "macrodata", "regression",
         "Fit a least-squares linear regression of realcons on realdpi with an intercept. Report the slope and the R-squared, both rounded to 4 decimal places.",
         lambda d: [E("slope", _ols(d, "realcons", ["realdpi"])[0][1], 4),
                    E("r_squared", _ols(d, "realcons", ["realdpi"])[1], 4)]),
    Task("real-longley-ols", "longley", "regression",
         "Fit a least-squares linear regression of TOTEMP on GNP with an intercept. What is the slope, rounded to 4 decimal places, and the intercept, rounded to 2 decimal places?",
         lambda d: [E("slope", _ols(d, "TOTEMP", ["GNP"])[0][1], 4),
                    E("intercept", _ols(d, "TOTEMP", ["GNP"])[0][0])],
         slots=False),
    Task("real-grunfeld-ols", "grunfeld", "regression",
         "Fit a least-squares linear regression of invest on value and capital (with an intercept) over all rows. Report the coefficients of value and of capital, rounded to 4 decimal places.",
         lambda d: [E("value_coef", _ols(d, "invest", ["value", "capital"])[0][1], 4),
                    E("capital_coef", _ols(d, "invest", ["value", "capital"])[0][2], 4)]),
    Task("real-diab-bmi-ols", "diabetes", "regression",
         "Fit a least-squares linear regression of target on bmi (with an intercept). What is the slope, rounded to 2 decimal places, and what target does the line predict for a bmi of 30, rounded to 2 decimal places?",
         lambda d: [E("slope", _ols(d, "target", ["bmi"])[0][1]),
                    E("prediction", _ols(d, "target", ["bmi"])[0] @ [1, 30])],
         slots=False),
    Task("real-state-ols", "statecrime", "regression",
         "Fit a least-squares linear regression of violent on poverty and single (with an intercept). Report the R-squared rounded to 4 decimal places and the coefficient of single rounded to 2 decimal places.",
         lambda d: [E("r_squared", _ols(d, "violent", ["poverty", "single"])[1], 4),
                    E("single_coef", _ols(d, "violent", ["poverty", "single"])[0][2])]),
    # ---------------------------------------------------------------- outliers
    Task("real-iris-iqr", "iris", "outliers",
         "Using the IQR rule (below Q1 - 1.5*IQR or above Q3 + 1.5*IQR, with pandas' default quantiles), how many sepal width (cm) values are outliers, and what is the lower fence, rounded to 3 decimal places?",
         lambda d: [E("outliers", _outliers(d["sepal width (cm)"]), 0),
                    E("lower_fence", _fences(d["sepal width (cm)"])[0], 3)]),
    Task("real-wine-zscore", "wine", "outliers",
         "How many wines have a magnesium value whose z-score is above 3 in absolute value (z from the mean and the population standard deviation, ddof=0)? What is the largest absolute z-score, rounded to 3 decimal places?",
         lambda d: [E("count", (np.abs(stats.zscore(d["magnesium"])) > 3).sum(), 0),
                    E("max_abs_z", np.abs(stats.zscore(d["magnesium"])).max(), 3)],
         slots=False),
    Task("real-bc-iqr", "breast_cancer", "outliers",
         "Using the IQR rule on 'mean area' (below Q1 - 1.5*IQR or above Q3 + 1.5*IQR, pandas' default quantiles), how many tumours are outliers, and what is the upper fence, rounded to 2 decimal places?",
         lambda d: [E("outliers", _outliers(d["mean area"]), 0),
                    E("upper_fence", _fences(d["mean area"])[1])]),
    Task("real-engel-iqr", "engel", "outliers",
         "Using the IQR rule on income (below Q1 - 1.5*IQR or above Q3 + 1.5*IQR, pandas' default quantiles), how many households are outliers, and what is the median foodexp, rounded to 2 decimal places?",
         lambda d: [E("outliers", _outliers(d["income"]), 0), E("median_foodexp", d["foodexp"].median())],
         slots=False),
    # ---------------------------------------------------------------- feature engineering
    Task("real-macro-decade", "macrodata", "feature engineering",
         "Label each quarter with its decade (1950 for the years 1950-1959, 1960 for 1960-1969, and so on). Which decade has the highest mean infl, and what is that mean, rounded to 2 decimal places?",
         lambda d: _best(_by(d, _decade(d["year"]), "infl"), "decade", "mean_infl", 2, key_decimals=0)),
    Task("real-grunfeld-ratio", "grunfeld", "feature engineering",
         "Create a column invest_ratio as invest divided by capital. Which firm has the highest mean invest_ratio, and what is that mean, rounded to 3 decimal places?",
         lambda d: _best(_by(d.assign(r=d.invest / d.capital), "firm", "r"), "firm", "mean_ratio", 3),
         slots=False),
    Task("real-fair-affair-rate", "fair", "feature engineering",
         "Say a woman had an affair when affairs is greater than 0. What percentage of the women had an affair, rounded to 2 decimal places, and how many women are in the file?",
         lambda d: [E("percent", 100 * (d["affairs"] > 0).mean()), E("women", len(d), 0)]),
    Task("real-iris-ratio", "iris", "feature engineering",
         "Create petal_ratio as petal length (cm) divided by petal width (cm). What is its median over all flowers, and its mean over the virginica flowers? Round both to 3 decimal places.",
         lambda d: [E("median_ratio", (d["petal length (cm)"] / d["petal width (cm)"]).median(), 3),
                    E("virginica_mean", (d["petal length (cm)"] / d["petal width (cm)"])[d.species == "virginica"].mean(), 3)],
         slots=False),
    Task("real-diab-age-groups", "diabetes", "feature engineering",
         "Put each patient in an age group: under 40, 40 to 59, or 60 and over. How many patients are 60 and over, and what is the mean target of that group, rounded to 2 decimal places?",
         lambda d: [E("patients", (_age_group(d["age"]) == "60+").sum(), 0),
                    E("mean_target", d.loc[_age_group(d["age"]) == "60+", "target"].mean())]),
    # ---------------------------------------------------------------- time series
    Task("real-macro-gdp-growth", "macrodata", "time series",
         "Compute the quarter-over-quarter growth of realgdp in percent (100 times the change from the previous quarter, in file order). In which year and quarter was the growth lowest, and what was it, rounded to 2 decimal places?",
         _gdp_growth),
    Task("real-grunfeld-gm", "grunfeld", "time series",
         "For the firm General Motors, compute the year-over-year percentage change of invest (100 times the change from the previous year, in year order). In which year was the change largest, and what was it, rounded to 2 decimal places?",
         _gm_growth, slots=False),
    Task("real-nile-rolling", "nile", "time series",
         "Compute the 10-year rolling mean of volume (10 rows, in year order, the window ending at each year). What is its largest value, rounded to 2 decimal places, and in which year does that window end?",
         _nile_rolling),
    Task("real-sunspots-decade", "sunspots", "time series",
         "Group the years by decade (1700 for 1700-1709, 1710 for 1710-1719, and so on). Which decade has the highest mean SUNACTIVITY, and what is that mean, rounded to 2 decimal places?",
         lambda d: _best(_by(d, _decade(d["YEAR"]), "SUNACTIVITY"), "decade", "mean_activity", 2,
                         key_decimals=0), slots=False),
]  # fmt: skip

REAL_TASKS: list[Task] = with_halves(
    [replace(t, suite="real", file=REAL_DATASETS[t.dataset][0]) for t in _TASKS]
)
