"""Content-addressed caches: trained targets (:mod:`.targets`, or shared storage by URL: :mod:`.remote`)
and attack results (:mod:`.results`), with what keeps them honest: the entry lock (:mod:`.lock`), the
cross-host lease (:mod:`.lease`), the signed manifest (:mod:`.manifest`) and where the cache lives (:mod:`.url`,
:mod:`.opening`)."""
