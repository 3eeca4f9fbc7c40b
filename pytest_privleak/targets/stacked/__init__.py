"""Training k models of one architecture as one: their parameters stacked on a model axis (issue 35).

The seeds of a built-in target (and the reference models of a membership
attack) are k models of the same architecture that differ in their seed and
data. Here the parameters of the k models are stacked on a leading model axis
(``[k, *shape]``) and one forward and backward pass trains them all: the
embeddings, dropout, heads, the CRF, the loss, the clipping and the optimiser
step run once for the stack, as batched matrix products and elementwise
operations over the model axis; each model keeps its own initialisation (its
seed), data order, dropout and word-dropout draws (a generator per model),
gradient clipping, optimiser state and early stopping.

It is the one training path of the recurrent targets (a single model is a
stack of one), and a model's arithmetic does not depend on which models it is
stacked with: on the CPU, model j trained alone and trained among seven give
bitwise-identical weights (``tests/test_stacked_training.py``). After
training each model is unstacked into an ordinary per-seed network, so the
attacks, the cache entries and the figures' pipeline see what they saw before.

``torch.func.vmap`` over ``nn.LSTM`` has no batching rule in torch 2.13
("Batching rule not implemented for aten::lstm.input"): each model's
recurrence runs through torch's fused LSTM kernel with its slice of the
stacked weights, the fastest of the ways measured on the CPU (:mod:`.lstm`).
The CRF's forward algorithm runs for all models at once as one batched
matrix product per step (:mod:`.crf`).

Modules: :mod:`.params` (stacking, per-model noise, clipping, optimiser
narrowing), :mod:`.layers` (embedding, linear, character CNN), :mod:`.lstm`,
:mod:`.crf`, :mod:`.loop` (the epoch loop), :mod:`.plan` (which models train
together); one module per target's loss (:mod:`.joint`, :mod:`.language_model`,
:mod:`.tagger`). Each model is cached under its own key
(:func:`~pytest_privleak.targets.training.cached_many`).
"""
