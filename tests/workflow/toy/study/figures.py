"""The toy study draws no figure."""


def figures(data, table):
    return []
