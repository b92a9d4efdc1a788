"""Settings for every pytest run in this repository: the library's tests and nbval's runs
of the notebooks (`make test`, `make thread-check`, `make busy-check`)."""

# After a cell has finished, nbval waits 5 s (its fixed default) for each further message
# from the kernel, the last being "idle". After minutes of training on a loaded machine
# that wait has run out once (5.2's race, in a full `make test`) though the cell had
# finished and passed on its own; a minute is still quick to report a kernel that died.
NBVAL_OUTPUT_TIMEOUT = 60


def pytest_collection_modifyitems(items):
    for item in items:
        if hasattr(item, "output_timeout"):  # an nbval cell
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT
