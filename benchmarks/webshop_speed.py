"""WebShop's costs: the generated catalog, the BM25 index, a search, and env steps per second.

Each build is timed from scratch (the in-process caches are bypassed); the step rate is
measured through ``WebShopEnv`` itself (prompt rendering, answer parsing, search, reward
and ``info`` included) on two kinds of episodes: the expert's plans replayed (search,
product, options, buy) and random legal clicks after a search (15 steps, no purchase).
Searches repeat across runs, so they come from the store's cache. Best of ``--repeats``.

Run: ``python benchmarks/webshop_speed.py [--products 3000] [--episodes 300] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import importlib
import random
import time

from mage_envs.tasks.webshop import WebShopEnv, generate_catalog
from mage_envs.tasks.webshop.nouns import pipeline
from mage_envs.tasks.webshop.search import SearchIndex


def best_of(repeats: int, run) -> float:
    """The fastest of ``repeats`` runs of ``run()``, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def expert_plans(env: WebShopEnv, episodes: int) -> list[list[str]]:
    plans = []
    for instance in range(episodes):
        env.reset(options={"instance": instance})
        plans.append(env.expert_actions())
    return plans


def scripted_steps(env: WebShopEnv, plans: list[list[str]]) -> int:
    """Replay the expert's plans (searches cached after the first run)."""
    for instance, plan in enumerate(plans):
        env.reset(options={"instance": instance})
        for action in plan:
            env.step(f"<action>{action}</action>")
    return sum(len(plan) for plan in plans)


def random_steps(env: WebShopEnv, episodes: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    steps = 0
    for instance in range(episodes):
        _, info = env.reset(options={"instance": instance})
        done = False
        while not done:
            legal = [a for a in info["legal_actions"] if a != "click[buy now]"] or info["legal_actions"]
            action = rng.choice(legal)
            if action.startswith("search["):
                action = f"search[{env.goal.query} {rng.choice(['navy', 'small', 'organic', 'lightweight'])}]"
            _, _, terminated, truncated, info = env.step(f"<action>{action}</action>")
            done = terminated or truncated
            steps += 1
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--products", type=int, default=3000, help="catalog size (default: %(default)s)")
    parser.add_argument("--episodes", type=int, default=300, help="episodes per step benchmark (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measure, the best kept (default: %(default)s)")
    args = parser.parse_args()

    start = time.perf_counter()
    importlib.import_module("bm25s")
    import_s = time.perf_counter() - start
    build = generate_catalog.__wrapped__  # bypass the per-process cache
    generate_s = best_of(args.repeats, lambda: build(args.products))
    documents = [product.document() for product in build(args.products).products]
    index_s = best_of(args.repeats, lambda: SearchIndex(documents))
    index = SearchIndex(documents)
    queries = [f"{p.title} {p.attributes[-1]}" for p in build(args.products).products[:500]]
    search_s = best_of(args.repeats, lambda: [index.search(q) for q in queries]) / len(queries)
    start = time.perf_counter()
    tagger = pipeline()
    spacy_s = time.perf_counter() - start
    titles = [p.title for p in build(args.products).products[:500]]
    tag_s = best_of(args.repeats, lambda: [tagger(title) for title in titles]) / len(titles)

    env = WebShopEnv(num_products=args.products)
    env.shop.search.cache_clear()
    print(f"WebShop, {args.products} products ({len(documents[0].split())} words in the first document)")
    print(f"  import bm25s               {import_s * 1e3:8.1f} ms (once per process)")
    print(f"  generate the catalog       {generate_s * 1e3:8.1f} ms")
    print(f"  build the BM25 index       {index_s * 1e3:8.1f} ms")
    print(f"  one search (uncached)      {search_s * 1e6:8.1f} us")
    print(f"  load spaCy's tagger        {spacy_s * 1e3:8.1f} ms (once per process)")
    print(f"  tag one title (uncached)   {tag_s * 1e3:8.2f} ms (each title once per process)")
    plan_s = best_of(args.repeats, lambda: expert_plans(env, args.episodes)) / args.episodes
    print(f"  expert plan (with reset)   {plan_s * 1e3:8.1f} ms")
    plans = expert_plans(env, args.episodes)
    steps = scripted_steps(env, plans)
    seconds = best_of(args.repeats, lambda: scripted_steps(env, plans))
    print(f"  env steps/s, expert plans  {steps / seconds:8.0f} ({steps} steps, resets included)")
    steps = random_steps(env, args.episodes)
    seconds = best_of(args.repeats, lambda: random_steps(env, args.episodes))
    print(f"  env steps/s, random clicks {steps / seconds:8.0f} ({steps} steps, resets included)")


if __name__ == "__main__":
    main()
