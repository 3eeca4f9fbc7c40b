def test_unknown_pattern(canary):
    canary("pni")


def test_unknown_kind(train_target, nlu_dataset):
    train_target("bilstm", nlu_dataset)


def test_bad_config(train_target, nlu_dataset):
    train_target("joint-bilstm-crf", nlu_dataset, dropout=2.0)


def test_own_bug():
    raise ValueError("a bug in the team's own code; fix: theirs")
