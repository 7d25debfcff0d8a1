"""The analysis eval's follow-up chains: three questions in a row on one messy file, in
one agent and one kernel, as ``kernel-agent run --interactive``, ``%%agent`` and ``serve``
runs go. Each question builds on the state the last one left: the first loads and cleans
the file into a named frame, the second filters it or adds a column, the third asks a
statistic of the result. Only the first question names the file; the later ones name
the frames and columns made before.

The files are the messy-real suite's (``messy_data.py``). Every answer is computed here
from the careful reader's parse of the file, each step from scratch (so a step's answer
does not depend on the agent having got the one before right). Halves go by chain:
chains alternate between ``tuned`` and ``held-out``. Each question is scored by the strict
scorer, and a chain is solved when all three are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from analysis_tasks import E, Expected, Task, with_halves
from messy_data import MESSY_DATASETS
from scipy import stats

__all__ = ["CHAINS", "FOLLOWUP_TASKS", "Chain"]


@dataclass(frozen=True)
class Chain:
    """Three questions on one dataset, asked in a row in one kernel."""

    id: str
    dataset: str
    steps: tuple[Task, ...]

    @property
    def half(self) -> str:
        return self.steps[0].half


Answers = Callable[[pd.DataFrame], list[Expected]]


def _chain(cid: str, dataset: str, *steps: tuple[str, Answers, bool]) -> Chain:
    """The chain's questions as tasks; only the first names the file."""
    tasks = tuple(
        Task(f"{cid}-{n + 1}", dataset, "follow-up", question, answers, slots=slots,
             file=MESSY_DATASETS[dataset][0], suite="followup", names_file=n == 0)
        for n, (question, answers, slots) in enumerate(steps)
    )  # fmt: skip
    return Chain(cid, dataset, tasks)


# ------------------------------------------------------------------ helpers
def _best(s: pd.Series, key: str, value: str, decimals: int = 2, low: bool = False,
          key_decimals: int | None = None) -> list[Expected]:  # fmt: skip
    label = s.idxmin() if low else s.idxmax()
    name = E(key, label, key_decimals) if key_decimals is not None else E(key, str(label))
    return [name, E(value, s.loc[label], decimals)]


def _gentoo(d: pd.DataFrame) -> pd.DataFrame:
    d = d.dropna(subset=["Body Mass (g)"])
    return d[d["Species"].str.startswith("Gentoo")]


def _recent4(d: pd.DataFrame) -> pd.DataFrame:
    return d[(d["Year"].dt.year >= 1976) & (d["Cylinders"] == 4)]


def _slope(x: pd.Series, y: pd.Series) -> tuple[float, float]:
    both = pd.concat([x, y], axis=1).dropna()
    slope, intercept = np.polyfit(both.iloc[:, 0], both.iloc[:, 1], 1)
    return float(slope), float(intercept)


def _weather(d: pd.DataFrame) -> pd.DataFrame:
    return d.assign(temp_range=d["temp_max"] - d["temp_min"])


def _c93(d: pd.DataFrame) -> pd.DataFrame:
    return d.assign(lbs_per_hp=d["Weight"] / d["Horsepower"])


def _aq_filled(d: pd.DataFrame) -> pd.DataFrame:
    return d.assign(Ozone=d["Ozone"].fillna(d.groupby("Month")["Ozone"].transform("median")))


def _aq_peak(d: pd.DataFrame) -> list[Expected]:
    i = d["Ozone"].idxmax()
    day = pd.Timestamp(year=1973, month=int(d.loc[i, "Month"]), day=int(d.loc[i, "Day"]))
    return [E("date", day.strftime("%Y-%m-%d")), E("ozone", d.loc[i, "Ozone"], 0)]


def _gap07(d: pd.DataFrame) -> pd.DataFrame:
    d = d[d["year"] == 2007]
    return d.assign(gdp_total=d["pop"] * d["GDP per capita (US$)"] / 1e9)


def _both(d: pd.DataFrame) -> pd.DataFrame:
    d = d.dropna(subset=["brainwt", "bodywt"])
    return d.assign(log_body=np.log10(d["bodywt"]), log_brain=np.log10(d["brainwt"]))


def _pulsed(d: pd.DataFrame) -> pd.DataFrame:
    return d.dropna(subset=["Pulse"])


def _freq_none(d: pd.DataFrame) -> tuple[float, float]:
    p = _pulsed(d)
    r = stats.ttest_ind(p.loc[p.Exer == "Freq", "Pulse"], p.loc[p.Exer == "None", "Pulse"],
                        equal_var=False)  # fmt: skip
    return float(r.statistic), float(r.pvalue)


def _econ(d: pd.DataFrame) -> pd.DataFrame:
    return d.assign(unemp_rate=100 * d["unemploy"] / d["pop"])


def _econ_rolling(d: pd.DataFrame) -> list[Expected]:
    s = _econ(d).sort_values("date").set_index("date")["unemp_rate"].rolling(12).mean()
    return [E("max_rolling", s.max(), 3), E("month", s.idxmax().strftime("%Y-%m"))]


def _margins(d: pd.DataFrame) -> pd.Series:
    votes = np.sort(d[["Coderre", "Bergeron", "Joly"]].to_numpy(), axis=1)
    return pd.Series(votes[:, -1] - votes[:, -2], index=d.index)


CHAINS: list[Chain] = [
    _chain("chain-penguins", "penguins",
           ("Read the file into a DataFrame named peng, with the column names stripped of surrounding spaces, and drop the rows without a Body Mass (g). How many rows does peng have?",
            lambda d: [E("rows", len(d.dropna(subset=["Body Mass (g)"])), 0)], True),
           ("Keep only the Gentoo penguins of peng (Species starting with 'Gentoo') in a DataFrame named gentoo. How many are there, and what is their mean Body Mass (g), rounded to 2 decimal places?",
            lambda d: [E("gentoo", len(_gentoo(d)), 0), E("mean_mass", _gentoo(d)["Body Mass (g)"].mean())], False),
           ("In gentoo, what is the Pearson correlation between Flipper Length (mm) and Body Mass (g), rounded to 3 decimal places?",
            lambda d: [E("correlation", _gentoo(d)["Flipper Length (mm)"].corr(_gentoo(d)["Body Mass (g)"]), 3)], True)),
    _chain("chain-cars", "cars",
           ("Load it into a DataFrame named cars and add a column model_year holding the four-digit year of the Year column. Which model_year has the most cars, and how many distinct model years are there?",
            lambda d: [E("model_year", d["Year"].dt.year.value_counts().idxmax(), 0), E("years", d["Year"].dt.year.nunique(), 0)], False),
           ("Keep the cars of cars with a model_year of 1976 or later and 4 Cylinders in a DataFrame named recent4. How many cars does recent4 hold?",
            lambda d: [E("cars", len(_recent4(d)), 0)], True),
           ("For recent4, fit a least-squares line of Miles_per_Gallon on Weight_in_lbs (with an intercept; rows with a missing value dropped). What is the slope, rounded to 5 decimal places?",
            lambda d: [E("slope", _slope(_recent4(d)["Weight_in_lbs"], _recent4(d)["Miles_per_Gallon"])[0], 5)], True)),
    _chain("chain-seattle", "seattle",
           ("Load it into a DataFrame named weather, with the date column parsed as dates. Which weather label is the most common, and on how many days?",
            lambda d: _best(d["weather"].value_counts(), "weather", "days", 0), True),
           ("Add a column temp_range = temp_max - temp_min to weather. What is the mean temp_range over all days, rounded to 3 decimal places?",
            lambda d: [E("mean_range", _weather(d)["temp_range"].mean(), 3)], False),
           ("Among the days of 2014 in weather, which month (1-12) has the largest mean temp_range, and what is that mean, rounded to 3 decimal places?",
            lambda d: _best(_weather(d)[d.date.dt.year == 2014].groupby(d.date.dt.month)["temp_range"].mean(), "month", "mean_range", 3, key_decimals=0), True)),
    _chain("chain-cars93", "cars93",
           ("Load it into a DataFrame named c93 with Weight and EngineSize converted to numbers (Weight in pounds, EngineSize in litres). What are the mean Weight and the mean EngineSize, rounded to 2 decimal places?",
            lambda d: [E("mean_weight", d["Weight"].mean()), E("mean_engine", d["EngineSize"].mean())], True),
           ("Add a column lbs_per_hp to c93: Weight divided by Horsepower. Which car (column Make) has the lowest lbs_per_hp, and what is it, rounded to 3 decimal places?",
            lambda d: _best(_c93(d).set_index("Make")["lbs_per_hp"], "make", "lbs_per_hp", 3, low=True), False),
           ("Among the cars of c93 with lbs_per_hp below 20, how many have the Origin USA, and what is the mean Price of those USA cars, rounded to 2 decimal places?",
            lambda d: [E("usa_cars", ((_c93(d).lbs_per_hp < 20) & (d.Origin == "USA")).sum(), 0),
                       E("mean_price", d.loc[(_c93(d).lbs_per_hp < 20) & (d.Origin == "USA"), "Price"].mean())], True)),
    _chain("chain-airquality", "airquality",
           ("Load it into a DataFrame named aq. The measurements are from 1973 (the year is in no column). On which date (YYYY-MM-DD) was the highest Ozone recorded, and what was it?",
            _aq_peak, True),
           ("Fill the missing Ozone values of aq with the median Ozone of their Month (for example with groupby and transform), in place. What is the mean Ozone after filling, rounded to 3 decimal places?",
            lambda d: [E("mean_ozone", _aq_filled(d)["Ozone"].mean(), 3)], False),
           ("Using aq with the filled Ozone, what is the Pearson correlation between Ozone and Temp, rounded to 4 decimal places?",
            lambda d: [E("correlation", _aq_filled(d)["Ozone"].corr(_aq_filled(d)["Temp"]), 4)], True)),
    _chain("chain-gapminder", "gapminder",
           ("Load it into a DataFrame named gap with pop as integers. What was the total pop of all countries in 1952 (an integer)?",
            lambda d: [E("total_pop", d.loc[d.year == 1952, "pop"].sum(), 0)], True),
           ("Make gap07 with the rows of gap for 2007 only, and add gdp_total = pop * GDP per capita (US$) / 1e9 (in billions). Which country has the largest gdp_total, and what is it, rounded to 2 decimal places?",
            lambda d: _best(_gap07(d).set_index("country")["gdp_total"], "country", "gdp_total", 2), False),
           ("In gap07, how many countries have a gdp_total above 100, and what is their median lifeExp, rounded to 3 decimal places?",
            lambda d: [E("countries", (_gap07(d).gdp_total > 100).sum(), 0),
                       E("median_lifeexp", _gap07(d).loc[_gap07(d).gdp_total > 100, "lifeExp"].median(), 3)], True)),
    _chain("chain-msleep", "msleep",
           ("Load it into a DataFrame named sleep, with bodywt and brainwt as numbers in kg. How many animals have both brainwt and bodywt recorded?",
            lambda d: [E("animals", len(_both(d)), 0)], True),
           ("Keep those animals in a DataFrame named both, and add log_body (base-10 log of bodywt) and log_brain (base-10 log of brainwt). What is the mean log_brain, rounded to 4 decimal places?",
            lambda d: [E("mean_log_brain", _both(d)["log_brain"].mean(), 4)], False),
           ("Over both, fit a least-squares line of log_brain on log_body (with an intercept). What are the slope and the intercept, rounded to 4 decimal places?",
            lambda d: [E("slope", _slope(_both(d)["log_body"], _both(d)["log_brain"])[0], 4),
                       E("intercept", _slope(_both(d)["log_body"], _both(d)["log_brain"])[1], 4)], True)),
    _chain("chain-survey", "survey",
           ("Load it into a DataFrame named survey, keeping the Exer answer None as a value (it is an answer, not a missing value). How many students are in each Exer group: Freq, Some and None?",
            lambda d: [E("freq", (d.Exer == "Freq").sum(), 0), E("some", (d.Exer == "Some").sum(), 0),
                       E("none", (d.Exer == "None").sum(), 0)], True),
           ("Drop the students of survey without a Pulse and call the result pulsed. How many students are left, and what is the mean Pulse of the Exer group Freq, rounded to 2 decimal places?",
            lambda d: [E("students", len(_pulsed(d)), 0), E("mean_pulse_freq", _pulsed(d).loc[d.Exer == "Freq", "Pulse"].mean())], False),
           ("In pulsed, compare Pulse between the Exer groups Freq and None with Welch's t-test (Freq first). Is the difference significant at alpha = 0.05 (significant or not significant), and what is the p-value, rounded to 4 decimal places?",
            lambda d: [E("verdict", "significant" if _freq_none(d)[1] < 0.05 else "not significant"),
                       E("p_value", _freq_none(d)[1], 4)], True)),
    _chain("chain-economics", "economics",
           ("Load it into a DataFrame named econ, with date parsed as dates. In which month (YYYY-MM) was unemploy highest, and what was it?",
            lambda d: [E("month", d.loc[d.unemploy.idxmax(), "date"].strftime("%Y-%m")), E("unemploy", d.unemploy.max(), 0)], False),
           ("Add a column unemp_rate = 100 * unemploy / pop to econ (both are in thousands). What is the mean unemp_rate over the months of 2000, rounded to 3 decimal places?",
            lambda d: [E("mean_rate_2000", _econ(d).loc[d.date.dt.year == 2000, "unemp_rate"].mean(), 3)], True),
           ("Compute the 12-month rolling mean of econ's unemp_rate (12 rows, in date order, the window ending at each month). What is its largest value, rounded to 3 decimal places, and in which month (YYYY-MM) does that window end?",
            _econ_rolling, True)),
    _chain("chain-election", "election",
           ("Load it into a DataFrame named elec (a semicolon-separated, latin-1 file). How many districts are there, and how many votes in total over all districts (column total)?",
            lambda d: [E("districts", len(d), 0), E("votes", d["total"].sum(), 0)], True),
           ("Add a column margin to elec: the votes of the district's leading candidate minus those of the second (among Coderre, Bergeron and Joly). Which district had the smallest margin, and what was it?",
            lambda d: _best(_margins(d).set_axis(d["district"]), "district", "margin", 0, low=True), False),
           ("Among the districts of elec with a margin under 500 votes, how many did each candidate win (column winner)? Give the counts for Coderre, Bergeron and Joly.",
            lambda d: [E(w.lower(), (d.loc[_margins(d) < 500, "winner"] == w).sum(), 0) for w in ("Coderre", "Bergeron", "Joly")], True)),
]  # fmt: skip

FOLLOWUP_TASKS: list[Task] = with_halves(
    [step for chain in CHAINS for step in chain.steps],
    {step.id: ("tuned", "held-out")[n % 2] for n, c in enumerate(CHAINS) for step in c.steps},
)
