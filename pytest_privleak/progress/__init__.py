"""Progress of long work (target training, cache waits, audits): the events (:mod:`.events`), the channel
from xdist workers to the controller (:mod:`.channel`) and what a person reads (:mod:`.display`)."""
