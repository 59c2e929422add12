#!/bin/sh
# Stands in for node where the build was configured without one (packaging/setup.sh run
# configures the tests too, on machines that may have no node yet): the tests that need node fail
# and say why, instead of being left out of the run.
echo "no node was found when the build was configured: run packaging/setup.sh test, which installs it" >&2
exit 1
