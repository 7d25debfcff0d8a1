"""The analysis eval's messy-real suite: questions over public datasets written to disk as
messy exports (``messy_data.py``: TSV, pipe and semicolon files, latin-1, names with
spaces and dots, numbers with units and thousands separators, ``NA``/``.``/``None``,
local date formats).

The questions are of the kinds that failed on unseen data: verdicts (significant or not at
a stated alpha, normal or not), outliers by a stated rule, days counted against rows,
feature engineering, a train/test split stated exactly, group statistics, missing values,
and a label asked where a number is near. Every answer is computed here from the frame the
careful reader parses out of the file as written. Tuned and held-out halves alternate
within each category (``with_halves``); the strict scorer is the same.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from analysis_tasks import E, Expected, Task, with_halves
from messy_data import MESSY_DATASETS
from scipy import stats

__all__ = ["MESSY_TASKS"]


# ------------------------------------------------------------------ helpers
def _fences(s: pd.Series) -> tuple[float, float]:
    s = s.dropna()
    q1, q3 = s.quantile(0.25), s.quantile(0.75)
    return q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)


def _iqr_count(s: pd.Series) -> int:
    low, high = _fences(s)
    s = s.dropna()
    return int(((s < low) | (s > high)).sum())


def _z_count(s: pd.Series, limit: float) -> int:
    s = s.dropna()
    return int((np.abs(stats.zscore(s)) > limit).sum())


def _verdict(p: float, alpha: float) -> str:
    return "significant" if p < alpha else "not significant"


def _welch(a: pd.Series, b: pd.Series) -> tuple[float, float]:
    r = stats.ttest_ind(a.dropna(), b.dropna(), equal_var=False)
    return float(r.statistic), float(r.pvalue)


def _best(s: pd.Series, key: str, value: str, decimals: int = 2, low: bool = False,
          key_decimals: int | None = None) -> list[Expected]:  # fmt: skip
    label = s.idxmin() if low else s.idxmax()
    name = E(key, label, key_decimals) if key_decimals is not None else E(key, str(label))
    return [name, E(value, s.loc[label], decimals)]


def _split_r2(d: pd.DataFrame, y: str, xs: list[str], test_size: float) -> tuple[float, int]:
    from sklearn.linear_model import LinearRegression
    from sklearn.model_selection import train_test_split

    x_train, x_test, y_train, y_test = train_test_split(
        d[xs], d[y], test_size=test_size, random_state=0
    )
    model = LinearRegression().fit(x_train, y_train)
    return float(model.score(x_test, y_test)), len(x_test)


def _longest_dry(d: pd.DataFrame) -> list[Expected]:
    d = d.sort_values("date").reset_index(drop=True)
    dry = (d["precipitation"] == 0).to_numpy()
    best, start, run = 0, 0, 0
    for i, is_dry in enumerate(dry):
        run = run + 1 if is_dry else 0
        if run > best:
            best, start = run, i - run + 1
    return [E("days", best, 0), E("start", d.loc[start, "date"].strftime("%Y-%m-%d"))]


def _adelie(d: pd.DataFrame) -> pd.DataFrame:
    return d[d["Species"].str.startswith("Adelie")]


def _penguin_tree(d: pd.DataFrame) -> tuple[float, int]:
    from sklearn.model_selection import train_test_split
    from sklearn.tree import DecisionTreeClassifier

    cols = ["Flipper Length (mm)", "Body Mass (g)"]
    d = d.dropna(subset=cols)
    x_train, x_test, y_train, y_test = train_test_split(
        d[cols], d["Species"], test_size=0.3, random_state=0
    )
    model = DecisionTreeClassifier(random_state=0).fit(x_train, y_train)
    return float(model.score(x_test, y_test)), len(x_test)


def _economics_split(d: pd.DataFrame) -> list[Expected]:
    n = int(len(d) * 0.8)
    train, test = d.iloc[:n], d.iloc[n:]
    slope, intercept = np.polyfit(train["uempmed"], train["psavert"], 1)
    pred = intercept + slope * test["uempmed"]
    rmse = float(np.sqrt(((test["psavert"] - pred) ** 2).mean()))
    return [E("slope", slope, 4), E("rmse", rmse, 4)]


def _aq_date(d: pd.DataFrame) -> pd.Series:
    return pd.to_datetime(dict(year=1973, month=d["Month"], day=d["Day"]))


def _share(d: pd.DataFrame, who: str) -> pd.Series:
    return 100 * d[who] / d["total"]


def _gap_gain(d: pd.DataFrame) -> pd.Series:
    wide = d.pivot(index="country", columns="year", values="lifeExp")
    return wide[2007] - wide[1952]


def _stock_change(d: pd.DataFrame) -> pd.Series:
    d = d.sort_values("date")
    first = d.groupby("symbol")["price"].first()
    last = d.groupby("symbol")["price"].last()
    return 100 * (last / first - 1)


_TASKS: list[Task] = [
    # ---------------------------------------------------------------- verdict
    Task("messy-penguin-welch", "penguins", "verdict",
         "Among Adelie penguins (Species starting with 'Adelie'), compare Delta 15 N (o/oo) between the islands Dream and Torgersen with Welch's t-test (Dream first). Is the difference significant at alpha = 0.05? Answer significant or not significant, and give the p-value rounded to 4 decimal places.",
         lambda d: [E("verdict", _verdict(_welch(*[_adelie(d).loc[_adelie(d).Island == i, "Delta 15 N (o/oo)"] for i in ("Dream", "Torgersen")])[1], 0.05)),
                    E("p_value", _welch(*[_adelie(d).loc[_adelie(d).Island == i, "Delta 15 N (o/oo)"] for i in ("Dream", "Torgersen")])[1], 4)]),
    Task("messy-cars-shapiro", "cars", "verdict",
         "Test whether Acceleration is normally distributed with the Shapiro-Wilk test (scipy.stats.shapiro, missing values dropped). At alpha = 0.05, is it normal or not normal? Give the W statistic rounded to 4 decimal places too.",
         lambda d: [E("verdict", "normal" if stats.shapiro(d["Acceleration"].dropna()).pvalue >= 0.05 else "not normal"),
                    E("w_statistic", stats.shapiro(d["Acceleration"].dropna()).statistic, 4)]),
    Task("messy-cars93-welch", "cars93", "verdict",
         "Compare MPG.highway between USA and non-USA cars (column Origin) with Welch's t-test (USA first). Is the difference significant at alpha = 0.05? Answer significant or not significant, and give the t statistic rounded to 3 decimal places.",
         lambda d: [E("verdict", _verdict(_welch(d.loc[d.Origin == "USA", "MPG.highway"], d.loc[d.Origin == "non-USA", "MPG.highway"])[1], 0.05)),
                    E("t_statistic", _welch(d.loc[d.Origin == "USA", "MPG.highway"], d.loc[d.Origin == "non-USA", "MPG.highway"])[0], 3)]),
    Task("messy-survey-chi2", "survey", "verdict",
         "Is smoking (Smoke) independent of Sex? Run a chi-square test of independence (scipy.stats.chi2_contingency with its defaults) on the students with both recorded. At alpha = 0.05, is the association significant or not significant? Give the p-value rounded to 4 decimal places.",
         lambda d: [E("verdict", _verdict(stats.chi2_contingency(pd.crosstab(d.Sex, d.Smoke))[1], 0.05)),
                    E("p_value", stats.chi2_contingency(pd.crosstab(d.Sex, d.Smoke))[1], 4)]),
    Task("messy-msleep-spearman", "msleep", "verdict",
         "What is the Spearman rank correlation between bodywt and sleep_total (rows with both present), rounded to 3 decimal places? Is it significant at alpha = 0.01 (significant or not significant)?",
         lambda d: [E("rho", stats.spearmanr(d["bodywt"], d["sleep_total"], nan_policy="omit")[0], 3),
                    E("verdict", _verdict(stats.spearmanr(d["bodywt"], d["sleep_total"], nan_policy="omit")[1], 0.01))]),
    Task("messy-seattle-july", "seattle", "verdict",
         "Compare the daily temp_max of July 2012 with that of July 2015 using Welch's t-test (2012 first). Is the difference significant at alpha = 0.05 (significant or not significant), and what is the t statistic, rounded to 3 decimal places?",
         lambda d: [E("verdict", _verdict(_welch(*[d.loc[(d.date.dt.year == y) & (d.date.dt.month == 7), "temp_max"] for y in (2012, 2015)])[1], 0.05)),
                    E("t_statistic", _welch(*[d.loc[(d.date.dt.year == y) & (d.date.dt.month == 7), "temp_max"] for y in (2012, 2015)])[0], 3)]),
    Task("messy-aq-pearson", "airquality", "verdict",
         "On the days with both Ozone and Solar.R recorded, what is the Pearson correlation between them, rounded to 3 decimal places, and is it significant at alpha = 0.001 (significant or not significant)?",
         lambda d: [E("r", stats.pearsonr(*d[["Ozone", "Solar.R"]].dropna().T.to_numpy())[0], 3),
                    E("verdict", _verdict(stats.pearsonr(*d[["Ozone", "Solar.R"]].dropna().T.to_numpy())[1], 0.001))]),
    # ---------------------------------------------------------------- outliers
    Task("messy-penguin-iqr", "penguins", "outliers",
         "Among Adelie penguins (Species starting with 'Adelie'), use the IQR rule on Flipper Length (mm) (outliers are below Q1 - 1.5*IQR or above Q3 + 1.5*IQR, pandas' default quantiles, missing values dropped). How many Adelie penguins are outliers, and what is the lower fence, rounded to 2 decimal places?",
         lambda d: [E("outliers", _iqr_count(_adelie(d)["Flipper Length (mm)"]), 0),
                    E("lower_fence", _fences(_adelie(d)["Flipper Length (mm)"])[0])]),
    Task("messy-seattle-wind-iqr", "seattle", "outliers",
         "Using the IQR rule on wind (below Q1 - 1.5*IQR or above Q3 + 1.5*IQR, pandas' default quantiles), how many days are outliers, and what is the largest wind value among them?",
         lambda d: [E("outliers", _iqr_count(d["wind"]), 0), E("max_wind", d["wind"].max(), 1)],
         slots=False),
    Task("messy-msleep-iqr", "msleep", "outliers",
         "Using the IQR rule on bodywt in kg (below Q1 - 1.5*IQR or above Q3 + 1.5*IQR, pandas' default quantiles), how many animals are outliers, and what is the upper fence, rounded to 2 decimal places?",
         lambda d: [E("outliers", _iqr_count(d["bodywt"]), 0), E("upper_fence", _fences(d["bodywt"])[1])]),
    Task("messy-survey-pulse-z", "survey", "outliers",
         "How many students have a Pulse whose z-score is above 2.5 in absolute value (z from the mean and the population standard deviation, ddof=0, missing values dropped)? What is the mean Pulse, rounded to 2 decimal places?",
         lambda d: [E("count", _z_count(d["Pulse"], 2.5), 0), E("mean_pulse", d["Pulse"].mean())],
         slots=False),
    Task("messy-aq-ozone-iqr", "airquality", "outliers",
         "Using the IQR rule on Ozone (below Q1 - 1.5*IQR or above Q3 + 1.5*IQR, pandas' default quantiles, missing values dropped), how many days are outliers, and what is the lower fence, rounded to 2 decimal places?",
         lambda d: [E("outliers", _iqr_count(d["Ozone"]), 0), E("lower_fence", _fences(d["Ozone"])[0])]),
    # ---------------------------------------------------------------- dates
    Task("messy-penguin-egg-days", "penguins", "dates",
         "Date Egg is the day a nest's first egg was observed. In 2008, on how many distinct days was an egg observed, and how many penguins (rows) have a Date Egg in 2008?",
         lambda d: [E("days", d.loc[d["Date Egg"].dt.year == 2008, "Date Egg"].nunique(), 0),
                    E("penguins", (d["Date Egg"].dt.year == 2008).sum(), 0)]),
    Task("messy-seattle-rain-days", "seattle", "dates",
         "How many days in 2015 had precipitation greater than 0, and in which month of 2015 (1-12) was the total precipitation largest?",
         lambda d: [E("rain_days", ((d.date.dt.year == 2015) & (d.precipitation > 0)).sum(), 0),
                    E("month", d[d.date.dt.year == 2015].groupby(d.date.dt.month)["precipitation"].sum().idxmax(), 0)],
         slots=False),
    Task("messy-seattle-dry-spell", "seattle", "dates",
         "What is the longest run of consecutive days with precipitation equal to 0, in days, and on which date (YYYY-MM-DD) did the first such longest run start?",
         _longest_dry),
    Task("messy-riots-days", "riots", "dates",
         "On how many distinct days did the deaths in this file occur, and on which date (YYYY-MM-DD) did the most deaths occur?",
         lambda d: [E("days", d["death_date"].nunique(), 0),
                    E("date", d["death_date"].value_counts().idxmax().strftime("%Y-%m-%d"))],
         slots=False),
    Task("messy-aq-weekend", "airquality", "dates",
         "The measurements were taken in 1973 (the year is in no column). How many days with Temp above 85 fell on a Saturday or a Sunday, and how many days with Temp above 85 are there in all?",
         lambda d: [E("weekend_days", ((d.Temp > 85) & (_aq_date(d).dt.day_of_week >= 5)).sum(), 0),
                    E("hot_days", (d.Temp > 85).sum(), 0)]),
    Task("messy-stocks-year", "stocks", "dates",
         "In which calendar year was AAPL's mean monthly price highest, and what was that mean, rounded to 2 decimal places?",
         lambda d: _best(d[d.symbol == "AAPL"].groupby(d.date.dt.year)["price"].mean(), "year", "mean_price", 2, key_decimals=0),
         slots=False),
    # ---------------------------------------------------------------- feature engineering
    Task("messy-cars-power-weight", "cars", "feature engineering",
         "Create power_to_weight as Horsepower divided by Weight_in_lbs, times 1000. Which Origin has the highest mean power_to_weight (missing Horsepower ignored), and what is that mean, rounded to 3 decimal places?",
         lambda d: _best(d.assign(p=1000 * d.Horsepower / d.Weight_in_lbs).groupby("Origin")["p"].mean(), "origin", "mean_power_to_weight", 3)),
    Task("messy-msleep-brain-ratio", "msleep", "feature engineering",
         "Create brain_ratio as brainwt divided by bodywt. Which animal (column name) has the highest brain_ratio, and what is that ratio, rounded to 4 decimal places?",
         lambda d: _best(d.assign(r=d.brainwt / d.bodywt).set_index("name")["r"].dropna(), "animal", "brain_ratio", 4),
         slots=False),
    Task("messy-election-share", "election", "feature engineering",
         "For each district, compute Joly's share of the district's total votes in percent. In how many districts was Joly's share above 40%, and what was Coderre's share of all votes in the city, in percent, rounded to 2 decimal places?",
         lambda d: [E("districts", (_share(d, "Joly") > 40).sum(), 0),
                    E("coderre_share", 100 * d["Coderre"].sum() / d["total"].sum())]),
    Task("messy-wind-strong", "wind", "feature engineering",
         "strength is a wind-speed range in m/s written as text (like '0-1' or '6+'). What is the total frequency, in percent, of the rows whose range starts at 4 m/s or more, rounded to 2 decimal places, and which direction has the largest total frequency over all strengths?",
         lambda d: [E("strong_frequency", d.loc[d.strength_low >= 4, "frequency"].sum()),
                    E("direction", d.groupby("direction")["frequency"].sum().idxmax())],
         slots=False),
    Task("messy-gap-gain", "gapminder", "feature engineering",
         "For each country, compute the gain in lifeExp from 1952 to 2007. Which country gained the most, and by how many years, rounded to 3 decimal places?",
         lambda d: _best(_gap_gain(d), "country", "gain", 3)),
    Task("messy-cars93-litres", "cars93", "feature engineering",
         "EngineSize is in litres. Create litres_per_cylinder as EngineSize divided by Cylinders, for the cars whose Cylinders is a number. How many cars have a Cylinders value that is not a number, and what is the mean litres_per_cylinder over the others, rounded to 4 decimal places?",
         lambda d: [E("not_numeric", pd.to_numeric(d.Cylinders, errors="coerce").isna().sum(), 0),
                    E("mean_litres_per_cylinder", (d.EngineSize / pd.to_numeric(d.Cylinders, errors="coerce")).mean(), 4)],
         slots=False),
    # ---------------------------------------------------------------- train/test split
    Task("messy-cars-split", "cars", "train/test split",
         "Drop the rows where Miles_per_Gallon, Horsepower or Weight_in_lbs is missing. Split them with sklearn's train_test_split(X, y, test_size=0.2, random_state=0), X being the columns [Weight_in_lbs, Horsepower] and y Miles_per_Gallon. Fit a LinearRegression on the training part. What is the R-squared on the test part, rounded to 4 decimal places, and how many rows are in the test part?",
         lambda d: [E("r_squared", _split_r2(d.dropna(subset=["Miles_per_Gallon", "Horsepower", "Weight_in_lbs"]), "Miles_per_Gallon", ["Weight_in_lbs", "Horsepower"], 0.2)[0], 4),
                    E("test_rows", _split_r2(d.dropna(subset=["Miles_per_Gallon", "Horsepower", "Weight_in_lbs"]), "Miles_per_Gallon", ["Weight_in_lbs", "Horsepower"], 0.2)[1], 0)]),
    Task("messy-penguin-tree", "penguins", "train/test split",
         "Drop the penguins with Flipper Length (mm) or Body Mass (g) missing. Split with sklearn's train_test_split(X, y, test_size=0.3, random_state=0), X those two columns in that order and y the Species. Fit DecisionTreeClassifier(random_state=0) on the training part. What is the accuracy on the test part, rounded to 4 decimal places, and how many penguins are in the test part?",
         lambda d: [E("accuracy", _penguin_tree(d)[0], 4), E("test_rows", _penguin_tree(d)[1], 0)],
         slots=False),
    Task("messy-economics-split", "economics", "train/test split",
         "Use the first 80% of the rows in file order (int(0.8 * number of rows)) to train and the rest to test. Fit a least-squares line of psavert on uempmed (with an intercept) on the training rows. What is the slope, rounded to 4 decimal places, and the root-mean-square error on the test rows, rounded to 4 decimal places?",
         _economics_split),
    Task("messy-gap-split", "gapminder", "train/test split",
         "Take the rows of the year 2007 and create log_gdp as the base-10 logarithm of GDP per capita (US$). Split with sklearn's train_test_split(X, y, test_size=0.25, random_state=0), X the column [log_gdp] and y lifeExp, fit a LinearRegression on the training part and report the R-squared on the test part, rounded to 4 decimal places, and the number of test rows.",
         lambda d: [E("r_squared", _split_r2(d[d.year == 2007].assign(log_gdp=np.log10(d["GDP per capita (US$)"])), "lifeExp", ["log_gdp"], 0.25)[0], 4),
                    E("test_rows", _split_r2(d[d.year == 2007].assign(log_gdp=np.log10(d["GDP per capita (US$)"])), "lifeExp", ["log_gdp"], 0.25)[1], 0)],
         slots=False),
    # ---------------------------------------------------------------- group stats
    Task("messy-penguin-flipper", "penguins", "group stats",
         "Which island has the largest mean Flipper Length (mm), and what is that mean, rounded to 2 decimal places?",
         lambda d: _best(d.groupby("Island")["Flipper Length (mm)"].mean(), "island", "mean_flipper", 2),
         slots=False),
    Task("messy-cars-model-year", "cars", "group stats",
         "Which model year (as a four-digit year) has the highest mean Miles_per_Gallon, and what is that mean, rounded to 2 decimal places?",
         lambda d: _best(d.groupby(d.Year.dt.year)["Miles_per_Gallon"].mean(), "year", "mean_mpg", 2, key_decimals=0)),
    Task("messy-cars93-weight", "cars93", "group stats",
         "Which Type of car has the highest mean Weight in pounds, and what is that mean, rounded to 2 decimal places?",
         lambda d: _best(d.groupby("Type")["Weight"].mean(), "type", "mean_weight", 2),
         slots=False),
    Task("messy-msleep-vore", "msleep", "group stats",
         "Among the animals whose vore is recorded, which vore has the highest median sleep_total, and what is that median, rounded to 2 decimal places?",
         lambda d: _best(d.groupby("vore")["sleep_total"].median(), "vore", "median_sleep", 2)),
    Task("messy-gap-continent-pop", "gapminder", "group stats",
         "In 2007, which continent had the largest total pop, and what was that total (an integer)?",
         lambda d: _best(d[d.year == 2007].groupby("continent")["pop"].sum(), "continent", "total_pop", 0),
         slots=False),
    Task("messy-aq-month", "airquality", "group stats",
         "Which Month (5-9) has the highest mean Ozone (missing values ignored), and what is that mean, rounded to 2 decimal places?",
         lambda d: _best(d.groupby("Month")["Ozone"].mean(), "month", "mean_ozone", 2, key_decimals=0)),
    Task("messy-survey-height", "survey", "group stats",
         "What is the mean Height of the Female and of the Male students (missing heights ignored)? Round both to 2 decimal places.",
         lambda d: [E("female_height", d.loc[d.Sex == "Female", "Height"].mean()),
                    E("male_height", d.loc[d.Sex == "Male", "Height"].mean())],
         slots=False),
    # ---------------------------------------------------------------- missing values
    Task("messy-penguin-missing", "penguins", "missing values",
         "How many penguins have no Sex recorded, and how many have no Delta 15 N (o/oo) value?",
         lambda d: [E("no_sex", d["Sex"].isna().sum(), 0), E("no_delta_15n", d["Delta 15 N (o/oo)"].isna().sum(), 0)]),
    Task("messy-survey-exer", "survey", "missing values",
         "Exer is how often a student exercises: Freq, Some or None. How many students answered None, and how many students have no Height recorded?",
         lambda d: [E("exer_none", (d["Exer"] == "None").sum(), 0), E("no_height", d["Height"].isna().sum(), 0)],
         slots=False),
    Task("messy-aq-complete", "airquality", "missing values",
         "How many days have at least one missing value, and what is the mean of Solar.R over the days where it is recorded, rounded to 2 decimal places?",
         lambda d: [E("incomplete_days", d.isna().any(axis=1).sum(), 0), E("mean_solar", d["Solar.R"].mean())]),
    Task("messy-cars93-luggage", "cars93", "missing values",
         "How many cars have no Luggage.room recorded, and what is the median Luggage.room of the others, rounded to 1 decimal place?",
         lambda d: [E("missing", d["Luggage.room"].isna().sum(), 0), E("median_luggage", d["Luggage.room"].median(), 1)],
         slots=False),
    Task("messy-riots-age", "riots", "missing values",
         "How many people in the file have no age recorded, and what is the median age of the others, rounded to 1 decimal place?",
         lambda d: [E("no_age", d["age"].isna().sum(), 0), E("median_age", d["age"].median(), 1)]),
    # ---------------------------------------------------------------- label
    Task("messy-election-votes", "election", "label",
         "Which candidate (one of the columns Coderre, Bergeron, Joly) received the most votes in total over all districts, and how many votes was that?",
         lambda d: _best(d[["Coderre", "Bergeron", "Joly"]].sum(), "candidate", "votes", 0)),
    Task("messy-election-bergeron", "election", "label",
         "In which district (the district column, as written) was Bergeron's share of the district's total votes highest, and what was that share in percent, rounded to 2 decimal places?",
         lambda d: _best(_share(d, "Bergeron").set_axis(d["district"]), "district", "share", 2),
         slots=False),
    Task("messy-stocks-change", "stocks", "label",
         "Which symbol's price changed by the largest percentage from its first to its last date, and by how many percent, rounded to 2 decimal places?",
         lambda d: _best(_stock_change(d), "symbol", "change", 2)),
    Task("messy-riots-type", "riots", "label",
         "What is the most common type of death in the file, and what share of all deaths is it, in percent, rounded to 2 decimal places?",
         lambda d: _best(100 * d["type"].value_counts(normalize=True), "type", "percent", 2),
         slots=False),
    Task("messy-economics-year", "economics", "label",
         "Which calendar year has the highest mean psavert (over its months in the file), and what is that mean, rounded to 3 decimal places?",
         lambda d: _best(d.groupby(d.date.dt.year)["psavert"].mean(), "year", "mean_psavert", 3, key_decimals=0)),
]  # fmt: skip

MESSY_TASKS: list[Task] = with_halves(
    [replace(t, suite="messy", file=MESSY_DATASETS[t.dataset][0]) for t in _TASKS]
)
