#!/usr/bin/env python3
"""A bag-of-words classifier in PyTorch, twice: word embeddings in PaceDB
(pacedb.torch.EmbeddingBag) and plain PyTorch (nn.EmbeddingBag(sparse=True)),
the same model, optimizer and generated documents; prints test accuracy and
documents/s of both.

    PYTHONPATH=build/python python3 python/examples/torch_bow.py
    PYTHONPATH=build/python python3 python/examples/torch_bow.py --workers=2 --mode=sum

Model: the mean (or sum) of a document's word vectors h, then class scores
h . w_c + b_c; cross-entropy, Adagrad. Words are 40-bit hashes (PaceDB uses
them as row ids as they are; plain PyTorch needs them mapped to 0..V-1). The
class rows [w_c, b_c] are a PaceDB table too (an Embedding read whole every
batch), so that all worker threads train one model. Documents: each class has its
own --topic_words among --vocab words; a document draws --doc_words words,
--signal of them from its class's topic, the rest from the whole vocabulary.
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

import pacedb
import pacedb.torch as pt


def generate(args):
    rng = np.random.default_rng(args.seed)
    vocab = rng.choice(2**40, args.vocab, replace=False).astype(np.int64)  # hashed words
    topics = [rng.choice(args.vocab, args.topic_words, replace=False)
              for _ in range(args.classes)]
    labels = rng.integers(0, args.classes, args.docs)
    words = rng.integers(0, args.vocab, (args.docs, args.doc_words))
    signal = rng.random((args.docs, args.doc_words)) < args.signal
    for d in range(args.docs):
        topic = topics[labels[d]]
        words[d, signal[d]] = topic[rng.integers(0, len(topic), signal[d].sum())]
    n_test = int(args.docs * args.test_fraction)
    index = torch.from_numpy(words)              # word index 0..V-1 (plain PyTorch)
    hashed = torch.from_numpy(vocab[words])      # the words' hashes (PaceDB rows)
    y = torch.from_numpy(labels)
    train = (index[n_test:], hashed[n_test:], y[n_test:])
    test = (index[:n_test], hashed[:n_test], y[:n_test])
    return vocab, train, test


def logits(bag, classes, docs):
    """The class scores of docs: h . w_c + b_c, h the bag of the words'
    vectors, [w_c, b_c] the row of class c."""
    h = bag(docs)
    dim = h.shape[1]
    return h @ classes[:, :dim].T + classes[:, dim]


def accuracy(bag, classes, docs, labels):
    with torch.no_grad():
        return (logits(bag, classes, docs).argmax(1) == labels).float().mean().item()


def batches(n, args, epoch, workers=1, rank=0):
    order = torch.from_numpy(np.random.default_rng(args.seed + epoch).permutation(n))
    return [order[torch.from_numpy(idx)]
            for idx in pt.split_batches(n, workers, args.batch, part=rank)]


def train_plain(args, train, test, init_words, init_classes):
    bag = nn.EmbeddingBag(args.vocab, args.dim, mode=args.mode, sparse=True)
    with torch.no_grad():
        bag.weight.copy_(torch.from_numpy(init_words))
    classes = nn.Parameter(torch.from_numpy(init_classes).clone())
    opt = torch.optim.Adagrad(list(bag.parameters()) + [classes], lr=args.lr)
    docs, _, y = train
    start = time.perf_counter()
    for epoch in range(args.epochs):
        for b in batches(len(y), args, epoch):
            loss = F.cross_entropy(logits(bag, classes, docs[b]), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    seconds = time.perf_counter() - start
    return accuracy(bag, classes, test[0], test[2]), len(y) * args.epochs / seconds


def make_pacedb_model(args, data_dir):
    client = pacedb.Client(data_dir=data_dir)
    bag = pt.EmbeddingBag(client, "bow.words", args.dim, mode=args.mode,
                          init=("normal", 0.0, 0.1, args.seed))
    # The output layer is a table too, so that every worker trains the same one.
    classes = pt.Embedding(client, "bow.classes", args.dim + 1,
                           init=("normal", 0.0, 0.1, args.seed + 1))
    return client, bag, classes


def train_pacedb(args, train, test, model):
    client, bag, classes = model
    opt = pt.Adagrad([bag, classes], lr=args.lr, clock_every=args.clock_every)
    all_classes = torch.arange(args.classes)
    _, docs, y = train

    def work(rank, worker):
        for epoch in range(args.epochs):
            for b in batches(len(y), args, epoch, args.workers, rank):
                loss = F.cross_entropy(logits(bag, classes(all_classes), docs[b]), y[b])
                opt.zero_grad()
                loss.backward()
                opt.step()
        opt.finish()

    start = time.perf_counter()
    pt.run_threads(client, work, args.workers)
    seconds = time.perf_counter() - start
    bag.eval()
    classes.eval()
    result = accuracy(bag, classes(all_classes), test[1], test[2])
    pt.close_thread_worker(client)
    return result, len(y) * args.epochs / seconds


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vocab", type=int, default=20000)
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--topic_words", type=int, default=200)
    p.add_argument("--docs", type=int, default=40000)
    p.add_argument("--doc_words", type=int, default=30)
    p.add_argument("--signal", type=float, default=0.15,
                   help="fraction of a document's words from its class's topic")
    p.add_argument("--test_fraction", type=float, default=0.1)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--mode", choices=["mean", "sum"], default="mean")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=1, help="PaceDB worker threads")
    # A clock writes every row updated since the last one; here a batch touches
    # about 6000 of the 20000 words, so clocks are spread wider than MF's.
    p.add_argument("--clock_every", type=int, default=100, help="batches per clock")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--data_dir", default="", help="PaceDB data dir (default: a temporary one)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if args.workers < 1 or args.clock_every < 1:
        p.error("--workers and --clock_every must be >= 1")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    vocab, train, test = generate(args)
    print(f"# {len(train[2])} training and {len(test[2])} test documents of {args.doc_words} "
          f"words, {args.vocab} words, {args.classes} classes; dim {args.dim}, {args.mode}, "
          f"adagrad lr {args.lr}, batch {args.batch}, {args.epochs} epochs")
    with tempfile.TemporaryDirectory(prefix="torch-bow-") as d:
        model = make_pacedb_model(args, args.data_dir or os.path.join(d, "pace"))
        client, bag, classes = model
        with client.worker() as w:  # the same initial rows for the plain twin
            init_words = w.get_many(bag.table, vocab)
            init_classes = w.get_many(classes.table, np.arange(args.classes))
        del client, bag, classes
        plain_acc, plain_rate = train_plain(args, train, test, init_words, init_classes)
        pace_acc, pace_rate = train_pacedb(args, train, test, model)
        del model  # closes the store before its directory goes
    print(f"plain PyTorch: test accuracy {plain_acc:.4f}, {plain_rate:,.0f} documents/s")
    print(f"PaceDB ({args.workers} worker{'s' if args.workers > 1 else ''}, clock every "
          f"{args.clock_every} batches): test accuracy {pace_acc:.4f}, {pace_rate:,.0f} "
          f"documents/s ({pace_rate / plain_rate:.2f}x plain)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
