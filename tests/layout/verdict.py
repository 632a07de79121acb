# SPDX-License-Identifier: MIT
"""The closing of every layout check (tests/layout/*.py): what it found, or what holds."""


def verdict(bad, holds):
    """Prints each line of BAD (the offences found) or, when there is none, HOLDS (the line
    that says what the check proved); returns the exit status, 1 on any offence."""
    for line in bad:
        print(line)
    if not bad:
        print(holds)
    return 1 if bad else 0
