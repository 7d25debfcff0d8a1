"""The analysis eval's data and tasks: six messy tables made deterministically, 42 questions.

Every answer is computed here with pandas, numpy and scipy from the same data the agent
reads. Each task asks for several values with a required rounding, in one of two forms:
``@name[value]`` slots (as analysis benchmarks do) or prose. Within each category the
tasks alternate between two halves: ``tuned`` (the half one may look at while working on
the agent) and ``held-out`` (only ever reported).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["DATASETS", "TASKS", "E", "Expected", "Task", "half_of", "with_halves", "write_dataset"]


@dataclass(frozen=True)
class Expected:
    """One value the answer must state: a number rounded to ``decimals``, or a word."""

    name: str
    value: float | str
    decimals: int = 2


@dataclass(frozen=True)
class Task:
    id: str
    dataset: str
    category: str
    question: str
    answers: Callable[[pd.DataFrame], list[Expected]]
    slots: bool = True  # "@name[value]" form; else prose
    plot: bool = False  # a plot must be made (an image output)
    extra: tuple[str, ...] = field(default=())
    #: the data file's name (default: the generated dataset's, from ``DATASETS``)
    file: str = ""
    #: "synthetic" (generated tables), "real" (public datasets, ``real_tasks.py``), "messy"
    #: (``messy_tasks.py``), "followup" (``followup_tasks.py``), "generic" (no data file)
    suite: str = "synthetic"
    #: the question names its data file (False: a follow-up on the kernel's state, or a
    #: task with no data)
    names_file: bool = True

    @property
    def half(self) -> str:
        return _HALVES[self.id]

    def prompt(self, expected: list[Expected]) -> str:
        """The question with its file and the required answer form."""
        if self.names_file:
            file = self.file or DATASETS[self.dataset][0]
            text = f"Using the file {file}: {self.question}"
        else:
            text = self.question
        if self.slots:
            form = " ".join(f"@{e.name}[{_placeholder(e)}]" for e in expected)
            return f"{text}\nGive the final answer in this format: {form}"
        return text


def _placeholder(e: Expected) -> str:
    if isinstance(e.value, str):
        return "name"
    return "value" if e.decimals else "integer"


def half_of(tasks: list[Task]) -> dict[str, str]:
    """Each task's half: tuned and held-out alternate through the tasks grouped by category."""
    ordered = sorted(range(len(tasks)), key=lambda i: (tasks[i].category, i))
    return {tasks[i].id: ("tuned", "held-out")[n % 2] for n, i in enumerate(ordered)}


def with_halves(tasks: list[Task], halves: dict[str, str] | None = None) -> list[Task]:
    """``tasks``, their halves recorded (``Task.half``); ids must be new. ``halves`` gives
    them instead of alternating within each category (follow-up chains: by chain)."""
    taken = set(_HALVES) & {t.id for t in tasks}
    assert not taken, f"task ids used twice: {sorted(taken)}"
    _HALVES.update(halves if halves is not None else half_of(tasks))
    return tasks


_HALVES: dict[str, str] = {}


# ------------------------------------------------------------------ data
def _sales(rng: np.random.Generator) -> pd.DataFrame:
    n = 400
    products = rng.choice(["Widget", "Gadget", "Doohickey"], n, p=[0.45, 0.3, 0.25])
    base = pd.Series(products).map({"Widget": 12.5, "Gadget": 30.0, "Doohickey": 7.25})
    price = (base * rng.uniform(0.9, 1.1, n)).round(2)
    price[rng.random(n) < 0.05] = np.nan
    dates = pd.Timestamp("2023-01-01") + pd.to_timedelta(rng.integers(0, 365, n), unit="D")
    return pd.DataFrame(
        {
            "order_id": np.arange(1001, 1001 + n),
            "order_date": dates.strftime("%Y-%m-%d"),
            "region": rng.choice(["North", "South", "East", "West"], n, p=[0.3, 0.2, 0.25, 0.25]),
            "product": products,
            "units": rng.integers(1, 20, n),
            "unit price ($)": price,
            "discount": rng.choice([0.0, 0.05, 0.1], n),
        }
    )


def _passengers(rng: np.random.Generator) -> pd.DataFrame:
    n = 300
    pclass = rng.choice([1, 2, 3], n, p=[0.25, 0.25, 0.5])
    sex = rng.choice(["male", "female"], n, p=[0.6, 0.4])
    age = rng.normal(32, 13, n).clip(1, 80).round(0)
    age[rng.random(n) < 0.15] = np.nan
    fare = (rng.gamma(2.0, 12.0, n) * pd.Series(pclass).map({1: 3.0, 2: 1.5, 3: 1.0})).round(2)
    chance = 0.2 + 0.45 * (sex == "female") + 0.15 * (pclass == 1) - 0.05 * (pclass == 3)
    embarked = rng.choice(["S", "C", "Q"], n, p=[0.7, 0.2, 0.1]).astype(object)
    embarked[[7, 150]] = None
    return pd.DataFrame(
        {
            "PassengerId": np.arange(1, n + 1),
            "Pclass": pclass,
            "Sex": sex,
            "Age": age,
            "Fare": fare,
            "Embarked": embarked,
            "Survived": (rng.random(n) < chance).astype(int),
        }
    )


def _sensors(rng: np.random.Generator) -> pd.DataFrame:
    hours = pd.date_range("2024-03-01", periods=240, freq="h")
    frames = []
    for i, sensor in enumerate(["S1", "S2", "S3"]):
        hour = np.asarray(hours.hour, dtype=float)
        temp = 20 + i + 4 * np.sin(2 * np.pi * hour / 24) + rng.normal(0, 1, len(hours))
        hum = 55 - 1.5 * (temp - 20) + rng.normal(0, 4, len(hours))
        hum[rng.random(len(hours)) < 0.04] = np.nan
        frames.append(
            pd.DataFrame(
                {
                    "timestamp": hours.strftime("%Y-%m-%d %H:%M"),
                    "sensor_id": sensor,
                    "temperature": temp.round(2),
                    "humidity": hum.round(1),
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    spikes = rng.choice(len(df), 6, replace=False)
    df.loc[spikes, "temperature"] += np.array([15, -14, 16, 13, -15, 17])
    return df


def _housing(rng: np.random.Generator) -> pd.DataFrame:
    n = 250
    area = rng.integers(600, 3500, n)
    bedrooms = np.clip((area / 700).round() + rng.integers(-1, 2, n), 1, 6).astype(int)
    age = rng.integers(0, 60, n)
    distance = rng.uniform(0.5, 30, n).round(1)
    noise = rng.normal(0, 25000, n)
    price = 50000 + 150 * area + 10000 * bedrooms - 800 * age - 3000 * distance + noise
    return pd.DataFrame(
        {
            "area_sqft": area,
            "bedrooms": bedrooms,
            "age_years": age,
            "distance_km": distance,
            "price": price.round(0),
        }
    )


def _survey(rng: np.random.Generator) -> pd.DataFrame:
    n = 200
    group = rng.choice(["18-29", "30-44", "45-64", "65+"], n)
    satisfaction = np.clip(
        rng.integers(1, 6, n) + (group == "65+") - (group == "18-29") * rng.integers(0, 2, n), 1, 5
    )
    recommend = np.where(satisfaction + rng.integers(-1, 2, n) >= 4, "Yes", "No")
    spend = (rng.gamma(3, 40, n) + 15 * satisfaction).round(2)
    return pd.DataFrame(
        {
            "respondent": np.arange(1, n + 1),
            "age_group": group,
            "gender": rng.choice(["female", "male", "other"], n, p=[0.48, 0.48, 0.04]),
            "satisfaction": satisfaction,
            "recommend": recommend,
            "spend": spend,
        }
    )


def _stocks(rng: np.random.Generator) -> pd.DataFrame:
    days = pd.bdate_range("2023-01-02", periods=250)
    common = rng.normal(0, 0.01, len(days))
    frames = []
    for ticker, start, vol in (("AAA", 100.0, 0.012), ("BBB", 50.0, 0.02)):
        returns = 0.0004 + common + rng.normal(0, vol, len(days))
        close = start * np.cumprod(1 + returns)
        frames.append(
            pd.DataFrame(
                {"date": days.strftime("%Y-%m-%d"), "ticker": ticker, "close": close.round(2)}
            )
        )
    return pd.concat(frames, ignore_index=True)


#: dataset name -> (file name, maker)
DATASETS: dict[str, tuple[str, Callable[[np.random.Generator], pd.DataFrame]]] = {
    "sales": ("sales.csv", _sales),
    "passengers": ("passengers.csv", _passengers),
    "sensors": ("sensors.csv", _sensors),
    "housing": ("housing.csv", _housing),
    "survey": ("survey.xlsx", _survey),
    "stocks": ("stocks.csv", _stocks),
}


def frame(name: str) -> pd.DataFrame:
    """The dataset as the agent will read it back (written, then read with pandas)."""
    seed = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)
    return DATASETS[name][1](np.random.default_rng(seed))


def write_dataset(name: str, folder: Path) -> tuple[Path, pd.DataFrame]:
    file, _ = DATASETS[name]
    df = frame(name)
    path = folder / file
    if file.endswith(".xlsx"):
        df.to_excel(path, index=False)
        back = pd.read_excel(path)
    else:
        df.to_csv(path, index=False)
        back = pd.read_csv(path)
    return path, back


# ------------------------------------------------------------------ answers
def E(name: str, value: float | str, decimals: int = 2) -> Expected:
    return Expected(name, value if isinstance(value, str) else float(value), decimals)


def _revenue(d: pd.DataFrame) -> pd.Series:
    d = d.dropna(subset=["unit price ($)"])
    return d["units"] * d["unit price ($)"] * (1 - d["discount"])


def _chi2(table: pd.DataFrame) -> tuple[float, float]:
    chi2, p, _, _ = stats.chi2_contingency(table)
    return float(chi2), float(p)


def _iqr_outliers(s: pd.Series) -> int:
    q1, q3 = s.quantile(0.25), s.quantile(0.75)
    iqr = q3 - q1
    return int(((s < q1 - 1.5 * iqr) | (s > q3 + 1.5 * iqr)).sum())


def _ols(x: pd.DataFrame, y: pd.Series) -> tuple[np.ndarray, float]:
    design = np.column_stack([np.ones(len(x)), x.to_numpy(float)])
    coef, *_ = np.linalg.lstsq(design, y.to_numpy(float), rcond=None)
    resid = y.to_numpy(float) - design @ coef
    r2 = 1 - (resid**2).sum() / ((y - y.mean()) ** 2).sum()
    return coef, float(r2)


def _returns(d: pd.DataFrame) -> pd.DataFrame:
    wide = d.pivot(index="date", columns="ticker", values="close").sort_index()
    return wide.pct_change().dropna()


def _sales_monthly(d: pd.DataFrame) -> pd.Series:
    return d.groupby(pd.to_datetime(d["order_date"]).dt.to_period("M"))["units"].sum()


def _daily_temp(d: pd.DataFrame) -> pd.Series:
    return d.groupby(pd.to_datetime(d["timestamp"]).dt.date)["temperature"].mean()


def _age_groups(d: pd.DataFrame) -> pd.Series:
    a = d["Age"].dropna()
    return pd.cut(a, [0, 17.999, 59.999, 200], labels=["child", "adult", "senior"]).value_counts()


TASKS: list[Task] = with_halves([
    # ---------------------------------------------------------------- sales
    Task("sales-units-stats", "sales", "summary",
         "What are the mean and the median number of units per order? Round to 2 decimal places.",
         lambda d: [E("mean_units", d["units"].mean()), E("median_units", d["units"].median())]),
    Task("sales-top-region", "sales", "group-by",
         "Which region sold the most units in total, and how many units was that?",
         lambda d: [E("region", d.groupby("region")["units"].sum().idxmax()),
                    E("total_units", d.groupby("region")["units"].sum().max(), 0)], slots=False),
    Task("sales-missing-price", "sales", "summary",
         "How many values are missing in the unit price column, and what is the mean unit price "
         "of the orders that have one? Round the mean to 2 decimal places.",
         lambda d: [E("missing", d["unit price ($)"].isna().sum(), 0),
                    E("mean_price", d["unit price ($)"].mean())]),
    Task("sales-revenue", "sales", "feature engineering",
         "Compute each order's revenue as units x unit price x (1 - discount), leaving out orders "
         "with a missing price. What is the total revenue and the mean revenue per order? "
         "Round both to 2 decimal places.",
         lambda d: [E("total_revenue", _revenue(d).sum()), E("mean_revenue", _revenue(d).mean())],
         slots=False),
    Task("sales-best-month", "sales", "time series",
         "Resample the orders by month of order_date and sum the units. Which month (as YYYY-MM) "
         "had the most units, and how many?",
         lambda d: [E("month", str(_sales_monthly(d).idxmax())),
                    E("units", _sales_monthly(d).max(), 0)]),
    Task("sales-chi2", "sales", "hypothesis test",
         "Test whether product is independent of region with a chi-square test of independence "
         "on the region by product table of order counts. Report the chi-square statistic and "
         "the p-value, both rounded to 4 decimal places.",
         lambda d: [E("chi2", _chi2(pd.crosstab(d["region"], d["product"]))[0], 4),
                    E("p_value", _chi2(pd.crosstab(d["region"], d["product"]))[1], 4)]),
    Task("sales-product-plot", "sales", "plot",
         "Plot a bar chart of the total units per product. Which product sold the most units, and "
         "what share of all units is that, as a percentage rounded to 2 decimal places?",
         lambda d: [E("product", d.groupby("product")["units"].sum().idxmax()),
                    E("share", 100 * d.groupby("product")["units"].sum().max() / d["units"].sum())],
         slots=False, plot=True),
    # ---------------------------------------------------------------- passengers
    Task("pass-survival-rate", "passengers", "summary",
         "What percentage of passengers survived (Survived is 1)? Round to 2 decimal places. "
         "How many passengers are there in total?",
         lambda d: [E("survival_rate", 100 * d["Survived"].mean()), E("passengers", len(d), 0)]),
    Task("pass-age-by-sex", "passengers", "group-by",
         "What is the mean Age of female and of male passengers (ignoring missing ages)? "
         "Round to 2 decimal places.",
         lambda d: [E("female_mean_age", d.loc[d["Sex"] == "female", "Age"].mean()),
                    E("male_mean_age", d.loc[d["Sex"] == "male", "Age"].mean())], slots=False),
    Task("pass-fill-age", "passengers", "feature engineering",
         "How many Age values are missing? Fill them with the median Age and report the mean Age "
         "after filling, rounded to 2 decimal places.",
         lambda d: [E("missing_age", d["Age"].isna().sum(), 0),
                    E("mean_age", d["Age"].fillna(d["Age"].median()).mean())]),
    Task("pass-fare-ttest", "passengers", "hypothesis test",
         "Do survivors and non-survivors differ in Fare? Run Welch's t-test (unequal variances) "
         "comparing the Fare of survivors with that of non-survivors, and report the t statistic "
         "and the p-value, rounded to 4 decimal places.",
         lambda d: [E("t_statistic", stats.ttest_ind(d.loc[d.Survived == 1, "Fare"],
                                                     d.loc[d.Survived == 0, "Fare"],
                                                     equal_var=False).statistic, 4),
                    E("p_value", stats.ttest_ind(d.loc[d.Survived == 1, "Fare"],
                                                 d.loc[d.Survived == 0, "Fare"],
                                                 equal_var=False).pvalue, 4)], slots=False),
    Task("pass-best-class", "passengers", "group-by",
         "Which passenger class (Pclass) has the highest survival rate, and what is that rate as a "
         "percentage rounded to 2 decimal places?",
         lambda d: [E("pclass", d.groupby("Pclass")["Survived"].mean().idxmax(), 0),
                    E("rate", 100 * d.groupby("Pclass")["Survived"].mean().max())]),
    Task("pass-sex-chi2", "passengers", "hypothesis test",
         "Run a chi-square test of independence between Sex and Survived (scipy's chi2_contingency "
         "with its default continuity correction). Report the chi-square statistic rounded to 2 "
         "decimal places, and whether the association is significant at the 0.05 level (yes/no).",
         lambda d: [E("chi2", _chi2(pd.crosstab(d["Sex"], d["Survived"]))[0]),
                    E("significant", "yes" if _chi2(pd.crosstab(d["Sex"], d["Survived"]))[1] < 0.05
                      else "no")]),
    Task("pass-age-groups", "passengers", "feature engineering",
         "Using only passengers with a known Age, label each as child (under 18), adult (18 to 59) "
         "or senior (60 and over). How many adults and how many children are there?",
         lambda d: [E("adults", _age_groups(d)["adult"], 0),
                    E("children", _age_groups(d)["child"], 0)], slots=False),
    # ---------------------------------------------------------------- sensors
    Task("sens-iqr-outliers", "sensors", "outliers",
         "Using the IQR rule (below Q1 - 1.5*IQR or above Q3 + 1.5*IQR, with pandas' default "
         "quantiles), how many temperature readings are outliers? Also report the IQR of "
         "temperature rounded to 3 decimal places.",
         lambda d: [E("outliers", _iqr_outliers(d["temperature"]), 0),
                    E("iqr", d["temperature"].quantile(0.75) - d["temperature"].quantile(0.25), 3)]),
    Task("sens-zscore", "sensors", "outliers",
         "How many temperature readings have an absolute z-score above 3, computing the z-score "
         "with the mean and the population standard deviation (ddof=0)? What is the largest "
         "absolute z-score, rounded to 3 decimal places?",
         lambda d: [E("count", (np.abs(stats.zscore(d["temperature"])) > 3).sum(), 0),
                    E("max_abs_z", np.abs(stats.zscore(d["temperature"])).max(), 3)], slots=False),
    Task("sens-daily-mean", "sensors", "time series",
         "Compute the daily mean temperature over all sensors (by the date of timestamp). Which "
         "date (YYYY-MM-DD) has the highest daily mean, and what is it, rounded to 2 decimals?",
         lambda d: [E("date", str(_daily_temp(d).idxmax())), E("mean", _daily_temp(d).max())]),
    Task("sens-corr", "sensors", "correlation",
         "What is the Pearson correlation between temperature and humidity, over the rows where "
         "both are present? Round to 3 decimal places. How many rows were used?",
         lambda d: [E("correlation", d[["temperature", "humidity"]].dropna().corr().iloc[0, 1], 3),
                    E("rows", len(d[["temperature", "humidity"]].dropna()), 0)]),
    Task("sens-humid-sensor", "sensors", "group-by",
         "Which sensor has the highest mean humidity, and what is that mean, rounded to 2 "
         "decimal places?",
         lambda d: [E("sensor", d.groupby("sensor_id")["humidity"].mean().idxmax()),
                    E("mean_humidity", d.groupby("sensor_id")["humidity"].mean().max())],
         slots=False),
    Task("sens-shapiro", "sensors", "hypothesis test",
         "Run a Shapiro-Wilk test on the temperature readings of sensor S1. Report the W "
         "statistic rounded to 4 decimal places, and whether the readings look normally "
         "distributed at the 0.05 level (yes/no).",
         lambda d: [E("w_statistic", stats.shapiro(d.loc[d.sensor_id == "S1", "temperature"])[0], 4),
                    E("normal", "yes" if stats.shapiro(d.loc[d.sensor_id == "S1", "temperature"])[1]
                      >= 0.05 else "no")]),
    Task("sens-missing-plot", "sensors", "plot",
         "Plot the temperature of sensor S2 over time as a line chart. How many humidity values are "
         "missing in the whole file, and what is the maximum temperature of S2, rounded to 2 "
         "decimal places?",
         lambda d: [E("missing_humidity", d["humidity"].isna().sum(), 0),
                    E("max_temperature", d.loc[d.sensor_id == "S2", "temperature"].max())],
         plot=True),
    # ---------------------------------------------------------------- housing
    Task("house-simple-ols", "housing", "regression",
         "Fit a linear regression of price on area_sqft (least squares with an intercept). Report "
         "the slope and the intercept, rounded to 2 decimal places.",
         lambda d: [E("slope", _ols(d[["area_sqft"]], d["price"])[0][1]),
                    E("intercept", _ols(d[["area_sqft"]], d["price"])[0][0])]),
    Task("house-multi-r2", "housing", "regression",
         "Fit a least-squares linear regression of price on area_sqft, bedrooms, age_years and "
         "distance_km, with an intercept. What is the R-squared, rounded to 4 decimal places, and "
         "the coefficient of age_years, rounded to 2 decimal places?",
         lambda d: [E("r_squared", _ols(d[["area_sqft", "bedrooms", "age_years", "distance_km"]],
                                        d["price"])[1], 4),
                    E("age_coefficient", _ols(d[["area_sqft", "bedrooms", "age_years",
                                                 "distance_km"]], d["price"])[0][3])],
         slots=False),
    Task("house-top-corr", "housing", "correlation",
         "Which of area_sqft, bedrooms, age_years and distance_km has the strongest Pearson "
         "correlation with price (by absolute value), and what is that correlation, rounded to 3 "
         "decimal places?",
         lambda d: [E("variable", d.corr()["price"].drop("price").abs().idxmax()),
                    E("correlation", d.corr()["price"][d.corr()["price"].drop("price").abs()
                                                        .idxmax()], 3)]),
    Task("house-price-per-sqft", "housing", "feature engineering",
         "Create a column price_per_sqft as price divided by area_sqft. What are its median and "
         "its maximum, rounded to 2 decimal places?",
         lambda d: [E("median", (d["price"] / d["area_sqft"]).median()),
                    E("maximum", (d["price"] / d["area_sqft"]).max())], slots=False),
    Task("house-bedrooms", "housing", "group-by",
         "Group the houses by number of bedrooms. Which bedroom count has the highest mean price, "
         "and what is that mean price, rounded to 2 decimal places?",
         lambda d: [E("bedrooms", d.groupby("bedrooms")["price"].mean().idxmax(), 0),
                    E("mean_price", d.groupby("bedrooms")["price"].mean().max())]),
    Task("house-spread", "housing", "summary",
         "What is the sample standard deviation (ddof=1) of price, rounded to 2 decimal places, "
         "and what is the largest age_years?",
         lambda d: [E("std_price", d["price"].std()), E("max_age", d["age_years"].max(), 0)],
         slots=False),
    Task("house-predict", "housing", "regression",
         "Using a least-squares linear regression of price on area_sqft alone (with an intercept), "
         "what price does it predict for a house of 2000 square feet? Round to 2 decimal places.",
         lambda d: [E("predicted_price", _ols(d[["area_sqft"]], d["price"])[0] @ [1, 2000])]),
    Task("house-zscore", "housing", "outliers",
         "How many houses have a price whose z-score is above 2 in absolute value (z from the mean "
         "and the population standard deviation, ddof=0)? What is the mean price, rounded to 2 "
         "decimal places?",
         lambda d: [E("count", (np.abs(stats.zscore(d["price"])) > 2).sum(), 0),
                    E("mean_price", d["price"].mean())], slots=False),
    # ---------------------------------------------------------------- survey (Excel)
    Task("surv-recommend", "survey", "summary",
         "What percentage of respondents answered Yes to recommend, rounded to 2 decimal places? "
         "How many respondents are there?",
         lambda d: [E("percent_yes", 100 * (d["recommend"] == "Yes").mean()),
                    E("respondents", len(d), 0)], slots=False),
    Task("surv-low-group", "survey", "group-by",
         "Which age_group has the lowest mean satisfaction, and what is that mean, rounded to 3 "
         "decimal places?",
         lambda d: [E("age_group", d.groupby("age_group")["satisfaction"].mean().idxmin()),
                    E("mean_satisfaction", d.groupby("age_group")["satisfaction"].mean().min(), 3)]),
    Task("surv-spend-ttest", "survey", "hypothesis test",
         "Compare spend between respondents who recommend (Yes) and those who do not (No) with a "
         "two-sample Student's t-test assuming equal variances. Report the t statistic and the "
         "p-value, rounded to 4 decimal places.",
         lambda d: [E("t_statistic", stats.ttest_ind(d.loc[d.recommend == "Yes", "spend"],
                                                     d.loc[d.recommend == "No", "spend"]).statistic, 4),
                    E("p_value", stats.ttest_ind(d.loc[d.recommend == "Yes", "spend"],
                                                 d.loc[d.recommend == "No", "spend"]).pvalue, 4)]),
    Task("surv-spearman", "survey", "correlation",
         "What is the Spearman rank correlation between satisfaction and spend, rounded to 3 "
         "decimal places? And the Pearson correlation, rounded to 3 decimal places?",
         lambda d: [E("spearman", stats.spearmanr(d["satisfaction"], d["spend"])[0], 3),
                    E("pearson", stats.pearsonr(d["satisfaction"], d["spend"])[0], 3)],
         slots=False),
    Task("surv-satisfied", "survey", "summary",
         "How many respondents gave a satisfaction of 4 or more, and what is the mean spend of those "
         "respondents, rounded to 2 decimal places?",
         lambda d: [E("count", (d["satisfaction"] >= 4).sum(), 0),
                    E("mean_spend", d.loc[d["satisfaction"] >= 4, "spend"].mean())]),
    Task("surv-female-spend", "survey", "group-by",
         "What is the median spend of female respondents and of male respondents, rounded to 2 "
         "decimal places?",
         lambda d: [E("female_median", d.loc[d.gender == "female", "spend"].median()),
                    E("male_median", d.loc[d.gender == "male", "spend"].median())], slots=False),
    Task("surv-outliers", "survey", "outliers",
         "Using the IQR rule on spend (below Q1 - 1.5*IQR or above Q3 + 1.5*IQR, pandas' default "
         "quantiles), how many respondents are outliers, and what is the upper fence, rounded to 2 "
         "decimal places?",
         lambda d: [E("outliers", _iqr_outliers(d["spend"]), 0),
                    E("upper_fence", d["spend"].quantile(0.75) + 1.5 * (d["spend"].quantile(0.75)
                                                                      - d["spend"].quantile(0.25)))]),
    # ---------------------------------------------------------------- stocks
    Task("stock-volatility", "stocks", "time series",
         "Compute each ticker's daily returns as the percentage change of close (as a fraction, "
         "in date order). Which ticker has the higher standard deviation of daily returns, and "
         "what is it, rounded to 4 decimal places?",
         lambda d: [E("ticker", _returns(d).std().idxmax()), E("std", _returns(d).std().max(), 4)]),
    Task("stock-june-close", "stocks", "time series",
         "What was AAA's close on the last trading day of June 2023, and BBB's close on that same "
         "day? Round to 2 decimal places.",
         lambda d: [E("aaa_close", d[(d.ticker == "AAA") & d.date.str.startswith("2023-06")]
                      .sort_values("date")["close"].iloc[-1]),
                    E("bbb_close", d[(d.ticker == "BBB") & d.date.str.startswith("2023-06")]
                      .sort_values("date")["close"].iloc[-1])], slots=False),
    Task("stock-rolling", "stocks", "time series",
         "Compute the 7-day rolling mean of BBB's close (7 trading rows, in date order). What is its "
         "value on the last date, rounded to 2 decimal places, and on which date is that?",
         lambda d: [E("rolling_mean", d[d.ticker == "BBB"].sort_values("date")["close"]
                      .rolling(7).mean().iloc[-1]),
                    E("date", d[d.ticker == "BBB"]["date"].max())]),
    Task("stock-return-corr", "stocks", "correlation",
         "Compute the daily returns of AAA and BBB (percentage change of close, by date) and their "
         "Pearson correlation, rounded to 3 decimal places. How many daily returns per ticker are "
         "there?",
         lambda d: [E("correlation", _returns(d).corr().iloc[0, 1], 3),
                    E("returns", len(_returns(d)), 0)], slots=False),
    Task("stock-up-days", "stocks", "summary",
         "On how many days did AAA close higher than on the previous trading day? What was AAA's "
         "highest close, rounded to 2 decimal places?",
         lambda d: [E("up_days", (d[d.ticker == "AAA"].sort_values("date")["close"].diff() > 0)
                      .sum(), 0),
                    E("max_close", d[d.ticker == "AAA"]["close"].max())]),
    Task("stock-plot-change", "stocks", "plot",
         "Plot both tickers' close over time on one line chart. By what percentage did each "
         "ticker's close change from its first to its last date? Round to 2 decimal places.",
         lambda d: [E("aaa_change", 100 * (lambda s: s.iloc[-1] / s.iloc[0] - 1)(
                        d[d.ticker == "AAA"].sort_values("date")["close"])),
                    E("bbb_change", 100 * (lambda s: s.iloc[-1] / s.iloc[0] - 1)(
                        d[d.ticker == "BBB"].sort_values("date")["close"]))], plot=True),
])  # fmt: skip
