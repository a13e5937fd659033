"""CSV cells that a spreadsheet shows as text, never runs as a formula (OWASP "CSV injection").

Audit rows carry strings that workers and job creators chose (a work named
``=HYPERLINK(...)``, a worker named ``@SUM(...)``). A spreadsheet opening the
export would evaluate a cell starting with = + - @, or with a tab or carriage
return before one; a leading single quote makes it text. Only strings change:
numbers and dates are written as they are.
"""

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def cell(value):
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def row(values) -> list:
    return [cell(value) for value in values]
