"""Per-language tables for `normalize`: month names, currency and unit words, abbreviations.

Facts only (how each language names these things); the numbers themselves are spelled by
num2words (en, de, fr, es) and cn2an (zh).
"""

from __future__ import annotations

from dataclasses import dataclass

# Currency symbols and codes to an ISO code.
CURRENCY_SYMBOLS = {"$": "USD", "US$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "￥": "CNY"}
CURRENCY_CODES = ("USD", "EUR", "GBP", "JPY", "CNY")


@dataclass(frozen=True)
class Rules:
    """How one language writes out what its texts abbreviate."""

    months: tuple[str, ...]
    # ISO code -> (major singular, major plural, minor singular, minor plural); no minor: "".
    currencies: dict[str, tuple[str, str, str, str]]
    currency_and: str  # between the major and the minor amount
    one: str  # "one" before a noun ("ein Euro", "un dólar")
    units: dict[str, tuple[str, str]]  # symbol -> (singular, plural)
    abbreviations: dict[str, str]
    minus: str
    decimal: str  # the decimal separator of written numbers
    group: str  # characters that group thousands
    hour: tuple[str, str] = ("", "")  # the word for "hour" (one, many) in a time; "" if none


EN = Rules(
    months=(
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ),
    currencies={
        "USD": ("dollar", "dollars", "cent", "cents"),
        "EUR": ("euro", "euros", "cent", "cents"),
        "GBP": ("pound", "pounds", "penny", "pence"),
        "JPY": ("yen", "yen", "", ""),
        "CNY": ("yuan", "yuan", "fen", "fen"),
    },
    currency_and="and",
    one="one",
    units={
        "%": ("percent", "percent"),
        "km/h": ("kilometer per hour", "kilometers per hour"),
        "mph": ("mile per hour", "miles per hour"),
        "km": ("kilometer", "kilometers"),
        "cm": ("centimeter", "centimeters"),
        "mm": ("millimeter", "millimeters"),
        "m": ("meter", "meters"),
        "kg": ("kilogram", "kilograms"),
        "mg": ("milligram", "milligrams"),
        "g": ("gram", "grams"),
        "ml": ("milliliter", "milliliters"),
        "l": ("liter", "liters"),
        "°C": ("degree Celsius", "degrees Celsius"),
        "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
        "kB": ("kilobyte", "kilobytes"),
        "MB": ("megabyte", "megabytes"),
        "GB": ("gigabyte", "gigabytes"),
    },
    abbreviations={
        "Mr.": "Mister",
        "Mrs.": "Missus",
        "Ms.": "Miz",
        "Dr.": "Doctor",
        "Prof.": "Professor",
        "Jr.": "Junior",
        "Sr.": "Senior",
        "etc.": "et cetera",
        "e.g.": "for example",
        "i.e.": "that is",
        "vs.": "versus",
        "approx.": "approximately",
    },
    minus="minus",
    decimal=".",
    group=",",
)

DE = Rules(
    months=(
        "Januar",
        "Februar",
        "März",
        "April",
        "Mai",
        "Juni",
        "Juli",
        "August",
        "September",
        "Oktober",
        "November",
        "Dezember",
    ),
    currencies={
        "USD": ("Dollar", "Dollar", "Cent", "Cent"),
        "EUR": ("Euro", "Euro", "Cent", "Cent"),
        "GBP": ("Pfund", "Pfund", "Penny", "Pence"),
        "JPY": ("Yen", "Yen", "", ""),
        "CNY": ("Yuan", "Yuan", "Fen", "Fen"),
    },
    currency_and="und",
    one="ein",
    units={
        "%": ("Prozent", "Prozent"),
        "km/h": ("Kilometer pro Stunde", "Kilometer pro Stunde"),
        "km": ("Kilometer", "Kilometer"),
        "cm": ("Zentimeter", "Zentimeter"),
        "mm": ("Millimeter", "Millimeter"),
        "m": ("Meter", "Meter"),
        "kg": ("Kilogramm", "Kilogramm"),
        "mg": ("Milligramm", "Milligramm"),
        "g": ("Gramm", "Gramm"),
        "ml": ("Milliliter", "Milliliter"),
        "l": ("Liter", "Liter"),
        "°C": ("Grad Celsius", "Grad Celsius"),
        "°F": ("Grad Fahrenheit", "Grad Fahrenheit"),
    },
    abbreviations={
        "z.B.": "zum Beispiel",
        "z. B.": "zum Beispiel",
        "d.h.": "das heißt",
        "usw.": "und so weiter",
        "bzw.": "beziehungsweise",
        "ca.": "circa",
        "Nr.": "Nummer",
        "Dr.": "Doktor",
        "Prof.": "Professor",
        "u.a.": "unter anderem",
        "evtl.": "eventuell",
    },
    minus="minus",
    decimal=",",
    group=".",
    hour=("Uhr", "Uhr"),
)

FR = Rules(
    months=(
        "janvier",
        "février",
        "mars",
        "avril",
        "mai",
        "juin",
        "juillet",
        "août",
        "septembre",
        "octobre",
        "novembre",
        "décembre",
    ),
    currencies={
        "USD": ("dollar", "dollars", "cent", "cents"),
        "EUR": ("euro", "euros", "centime", "centimes"),
        "GBP": ("livre", "livres", "penny", "pence"),
        "JPY": ("yen", "yens", "", ""),
        "CNY": ("yuan", "yuans", "fen", "fen"),
    },
    currency_and="et",
    one="un",
    units={
        "%": ("pour cent", "pour cent"),
        "km/h": ("kilomètre heure", "kilomètres heure"),
        "km": ("kilomètre", "kilomètres"),
        "cm": ("centimètre", "centimètres"),
        "mm": ("millimètre", "millimètres"),
        "m": ("mètre", "mètres"),
        "kg": ("kilogramme", "kilogrammes"),
        "mg": ("milligramme", "milligrammes"),
        "g": ("gramme", "grammes"),
        "ml": ("millilitre", "millilitres"),
        "l": ("litre", "litres"),
        "°C": ("degré Celsius", "degrés Celsius"),
        "°F": ("degré Fahrenheit", "degrés Fahrenheit"),
    },
    abbreviations={
        "M.": "Monsieur",
        "Mme": "Madame",
        "Mmes": "Mesdames",
        "Mlle": "Mademoiselle",
        "Dr": "Docteur",
        "etc.": "et cetera",
        "p.ex.": "par exemple",
        "p. ex.": "par exemple",
        "n°": "numéro",
    },
    minus="moins",
    decimal=",",
    group=" \u00a0\u202f",
    hour=("heure", "heures"),
)

ES = Rules(
    months=(
        "enero",
        "febrero",
        "marzo",
        "abril",
        "mayo",
        "junio",
        "julio",
        "agosto",
        "septiembre",
        "octubre",
        "noviembre",
        "diciembre",
    ),
    currencies={
        "USD": ("dólar", "dólares", "centavo", "centavos"),
        "EUR": ("euro", "euros", "céntimo", "céntimos"),
        "GBP": ("libra", "libras", "penique", "peniques"),
        "JPY": ("yen", "yenes", "", ""),
        "CNY": ("yuan", "yuanes", "fen", "fen"),
    },
    currency_and="con",
    one="un",
    units={
        "%": ("por ciento", "por ciento"),
        "km/h": ("kilómetro por hora", "kilómetros por hora"),
        "km": ("kilómetro", "kilómetros"),
        "cm": ("centímetro", "centímetros"),
        "mm": ("milímetro", "milímetros"),
        "m": ("metro", "metros"),
        "kg": ("kilogramo", "kilogramos"),
        "mg": ("miligramo", "miligramos"),
        "g": ("gramo", "gramos"),
        "ml": ("mililitro", "mililitros"),
        "l": ("litro", "litros"),
        "°C": ("grado Celsius", "grados Celsius"),
        "°F": ("grado Fahrenheit", "grados Fahrenheit"),
    },
    abbreviations={
        "Sr.": "señor",
        "Sra.": "señora",
        "Srta.": "señorita",
        "Dr.": "doctor",
        "Dra.": "doctora",
        "etc.": "etcétera",
        "p.ej.": "por ejemplo",
        "p. ej.": "por ejemplo",
        "Ud.": "usted",
        "Uds.": "ustedes",
        "núm.": "número",
    },
    minus="menos",
    decimal=",",
    group=".",
    hour=("hora", "horas"),
)

RULES = {"en": EN, "de": DE, "fr": FR, "es": ES}

# Chinese: what cn2an leaves as symbols, in words.
ZH_CURRENCIES = {"USD": "美元", "EUR": "欧元", "GBP": "英镑", "JPY": "日元", "CNY": "元"}
ZH_UNITS = {
    "km/h": "公里每小时",
    "km": "公里",
    "cm": "厘米",
    "mm": "毫米",
    "m": "米",
    "kg": "公斤",
    "mg": "毫克",
    "g": "克",
    "ml": "毫升",
    "l": "升",
    "°C": "摄氏度",
    "°F": "华氏度",
}
