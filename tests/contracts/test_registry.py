"""NodeRegistry: registration, stake, unbonding, the node list, and the functions only the
wired modules (market, dispute game, referee) may call."""

from __future__ import annotations

from eth_abi import encode as abi_encode

from node.chain import ChainClient, NodeRegistry, load_artifact
from tests.contracts.conftest import (
    ENDPOINT,
    ETHER,
    KEY_ID,
    MIN_STAKE,
    OP_ROOT,
    SLASH,
    UNBONDING_DELAY,
    Env,
)
from tests.contracts.helpers import reverts

ZERO = "0x" + "00" * 20


def _is_module(registry: NodeRegistry, account: str) -> bool:
    return bool(registry.client.call(registry.contract.functions.isModule(account)))


def test_deployment_is_wired(env: Env) -> None:
    assert env.registry.market() == env.market.address
    assert env.registry.game() == env.game.address
    assert env.registry.referee() == env.committee.address
    assert env.market.registry() == env.registry.address
    for bound in (env.game, env.committee):
        assert env.client.call(bound.contract.functions.registry()) == env.registry.address
    for module in (env.market.address, env.game.address, env.committee.address):
        assert _is_module(env.registry, module)
    for account in (env.outsider, env.deployer, env.registry.address, ZERO):
        assert not _is_module(env.registry, account)
    assert env.registry.owner() == env.deployer
    assert env.registry.min_stake() == MIN_STAKE
    assert env.registry.unbonding_delay() == UNBONDING_DELAY
    assert env.market.slash_amount() == SLASH
    assert env.market.max_k() == 16
    assert env.market.job_count() == 0


def test_register_records_node_and_emits(env: Env) -> None:
    node = env.nodes[0]
    before = env.client.balance(env.registry.address)
    result = env.registry.register(node, KEY_ID, ENDPOINT, 3 * ETHER)
    info = env.registry.get_node(node)
    assert info.registered and info.key_id == KEY_ID and info.endpoint == ENDPOINT
    assert (info.stake, info.locked, info.unbonding, info.unlock_at) == (3 * ETHER, 0, 0, 0)
    assert env.registry.is_registered(node)
    assert env.registry.free_stake(node) == 3 * ETHER
    assert env.client.balance(env.registry.address) == before + 3 * ETHER
    [event] = env.registry.events(result)
    assert event.name == "NodeRegistered"
    assert event.args == {"node": node, "keyId": KEY_ID, "endpoint": ENDPOINT, "stake": 3 * ETHER}


def test_register_at_exactly_min_stake(env: Env) -> None:
    env.registry.register(env.nodes[0], KEY_ID, ENDPOINT, MIN_STAKE)
    assert env.registry.get_node(env.nodes[0]).stake == MIN_STAKE


def test_register_reverts(env: Env) -> None:
    node = env.nodes[0]
    with reverts("StakeTooLow", sent=MIN_STAKE - 1, minimum=MIN_STAKE):
        env.registry.register(node, KEY_ID, ENDPOINT, MIN_STAKE - 1)
    with reverts("EmptyKeyId"):
        env.registry.register(node, b"\x00" * 32, ENDPOINT, MIN_STAKE)
    with reverts("EmptyEndpoint"):
        env.registry.register(node, KEY_ID, "", MIN_STAKE)
    env.registry.register(node, KEY_ID, ENDPOINT, MIN_STAKE)
    with reverts("AlreadyRegistered", node=node):
        env.registry.register(node, KEY_ID, ENDPOINT, MIN_STAKE)
    assert not env.registry.is_registered(env.nodes[1])


def test_update_endpoint(env: Env) -> None:
    node = env.nodes[0]
    with reverts("NotRegistered", node=node):
        env.registry.update_endpoint(node, "http://new")
    env.registry.register(node, KEY_ID, ENDPOINT, MIN_STAKE)
    with reverts("EmptyEndpoint"):
        env.registry.update_endpoint(node, "")
    [event] = env.registry.events(env.registry.update_endpoint(node, "http://new"))
    assert (event.name, event.args["endpoint"]) == ("EndpointUpdated", "http://new")
    assert env.registry.get_node(node).endpoint == "http://new"


def test_add_stake(env: Env) -> None:
    node = env.nodes[0]
    with reverts("NotRegistered", node=node):
        env.registry.add_stake(node, ETHER)
    env.registry.register(node, KEY_ID, ENDPOINT, MIN_STAKE)
    with reverts("ZeroAmount"):
        env.registry.add_stake(node, 0)
    [event] = env.registry.events(env.registry.add_stake(node, 5))
    assert event.name == "StakeAdded"
    assert event.args == {"node": node, "amount": 5, "stake": MIN_STAKE + 5}
    assert env.registry.get_node(node).stake == MIN_STAKE + 5


def test_withdrawal_waits_for_the_unbonding_delay(env: Env) -> None:
    node = env.nodes[0]
    env.registry.register(node, KEY_ID, ENDPOINT, 3 * ETHER)
    with reverts("NothingUnbonding", node=node):
        env.registry.withdraw_stake(node)
    result = env.registry.request_withdrawal(node, ETHER)
    [event] = env.registry.events(result)
    info = env.registry.get_node(node)
    assert event.name == "WithdrawalRequested"
    assert event.args["amount"] == ETHER and event.args["unbonding"] == ETHER
    assert info.unlock_at == event.args["unlockAt"]
    assert (
        info.unlock_at
        == env.w3.eth.get_block(result.receipt["blockNumber"])["timestamp"] + UNBONDING_DELAY
    )
    assert (info.stake, info.unbonding) == (2 * ETHER, ETHER)
    with reverts("UnbondingNotOver", node=node, unlockAt=info.unlock_at):
        env.registry.withdraw_stake(node)
    env.travel_to(info.unlock_at - 2)
    with reverts("UnbondingNotOver"):
        env.registry.withdraw_stake(node)
    env.travel_to(info.unlock_at)
    balance = env.client.balance(node)
    result = env.registry.withdraw_stake(node)
    assert env.client.balance(node) == balance + ETHER - result.fee_wei
    [event] = env.registry.events(result)
    assert (event.name, event.args) == ("Withdrawn", {"node": node, "amount": ETHER})
    assert env.registry.get_node(node).unbonding == 0
    with reverts("NothingUnbonding"):
        env.registry.withdraw_stake(node)


def test_second_request_adds_and_restarts_the_delay(env: Env) -> None:
    node = env.nodes[0]
    env.registry.register(node, KEY_ID, ENDPOINT, 3 * ETHER)
    env.registry.request_withdrawal(node, ETHER)
    first = env.registry.get_node(node).unlock_at
    env.travel_to(first - 10)
    env.registry.request_withdrawal(node, ETHER // 2)
    info = env.registry.get_node(node)
    assert info.unbonding == ETHER + ETHER // 2 and info.unlock_at > first
    env.travel_to(first)
    with reverts("UnbondingNotOver"):
        env.registry.withdraw_stake(node)


def test_request_withdrawal_reverts(env: Env) -> None:
    node = env.nodes[0]
    with reverts("NotRegistered"):
        env.registry.request_withdrawal(node, 1)
    env.registry.register(node, KEY_ID, ENDPOINT, 2 * ETHER)
    with reverts("ZeroAmount"):
        env.registry.request_withdrawal(node, 0)
    with reverts("InsufficientFreeStake", node=node, requested=2 * ETHER + 1, available=2 * ETHER):
        env.registry.request_withdrawal(node, 2 * ETHER + 1)


def test_locked_stake_cannot_be_withdrawn(env: Env) -> None:
    [node] = env.register_nodes(1, stake=MIN_STAKE + SLASH)
    job = env.post(1)
    result = env.market.claim_slot(node, job)
    locked = [e for e in env.registry.events(result) if e.name == "StakeLocked"]
    assert locked[0].args == {"node": node, "amount": SLASH, "locked": SLASH}
    assert env.registry.get_node(node).locked == SLASH
    assert env.registry.free_stake(node) == MIN_STAKE
    with reverts("InsufficientFreeStake", requested=MIN_STAKE + 1, available=MIN_STAKE):
        env.registry.request_withdrawal(node, MIN_STAKE + 1)
    env.registry.request_withdrawal(node, MIN_STAKE)  # the free part may leave


def test_everything_can_be_withdrawn_after_the_job(env: Env) -> None:
    [node] = env.register_nodes(1, stake=MIN_STAKE)
    job = env.post(1)
    env.market.claim_slot(node, job)
    env.market.commit_result(node, job, b"\x07" * 32, OP_ROOT)
    env.market.reveal(node, job, b"\x07" * 32, b"\x08" * 32, OP_ROOT)
    env.close_window(job)
    env.market.finalize(env.outsider, job)
    assert env.registry.get_node(node).locked == 0
    env.registry.request_withdrawal(node, MIN_STAKE)
    env.travel_to(env.registry.get_node(node).unlock_at)
    env.registry.withdraw_stake(node)
    env.market.withdraw(node)
    assert env.client.balance(env.registry.address) == 0
    assert env.client.balance(env.market.address) == 0


def test_module_only_functions(env: Env) -> None:
    [node] = env.register_nodes(1)
    for caller in (env.outsider, env.deployer, node):
        for call in (env.registry.lock, env.registry.unlock, env.registry.slash):
            with reverts("NotModule", caller=caller):
                call(caller, node, 1)


def test_set_market_guards(env: Env) -> None:
    with reverts("NotOwner", caller=env.outsider):
        env.registry.set_market(env.outsider, env.outsider, env.outsider, env.outsider)
    with reverts("MarketAlreadySet", market=env.market.address):
        env.registry.set_market(env.deployer, env.outsider, env.outsider, env.outsider)


def test_nodes_are_listed_in_registration_order(env: Env) -> None:
    assert env.registry.node_count() == 0
    with reverts("Panic", code=0x32):  # out of bounds
        env.registry.node_at(0)
    nodes = [env.nodes[2], env.nodes[0], env.nodes[1]]
    for i, node in enumerate(nodes):
        env.registry.register(node, bytes([i + 1]) * 32, f"http://n{i}", MIN_STAKE)
    assert env.registry.node_count() == 3
    assert [env.registry.node_at(i) for i in range(3)] == nodes
    with reverts("Panic", code=0x32):
        env.registry.node_at(3)
    # A refused registration adds nothing; a node that unbonds everything stays listed.
    with reverts("AlreadyRegistered"):
        env.registry.register(nodes[0], KEY_ID, ENDPOINT, MIN_STAKE)
    env.registry.request_withdrawal(nodes[1], MIN_STAKE)
    env.travel_to(env.registry.get_node(nodes[1]).unlock_at)
    env.registry.withdraw_stake(nodes[1])
    assert env.registry.get_node(nodes[1]).stake == 0
    assert env.registry.node_count() == 3 and env.registry.node_at(1) == nodes[1]


def _registry_with_eoa_modules(env: Env) -> NodeRegistry:
    """A second registry whose modules will be accounts, to drive lock/unlock/slash directly."""
    art = load_artifact("NodeRegistry")
    tx = env.client.deploy(
        env.deployer, art.bytecode, abi_encode(["uint256", "uint64"], [MIN_STAKE, 10])
    )
    registry = NodeRegistry(env.client, tx.receipt["contractAddress"])
    env.extra_addresses.append(registry.address)
    return registry


def test_set_market_rejects_zero_and_emits(env: Env) -> None:
    registry = _registry_with_eoa_modules(env)
    assert (registry.market(), registry.game(), registry.referee()) == (ZERO, ZERO, ZERO)
    assert not _is_module(registry, ZERO)  # nothing wired: the zero address is no module
    a, b, c = env.nodes[4:7]
    for wiring in ((ZERO, b, c), (a, ZERO, c), (a, b, ZERO)):
        with reverts("ZeroAddress"):
            registry.set_market(env.deployer, *wiring)
    with reverts("ZeroAddress"):
        registry.set_market(env.deployer, a, b, c, ZERO)
    d = env.outsider
    [event] = registry.events(registry.set_market(env.deployer, a, b, c, d))
    assert (event.name, event.args) == ("MarketSet", {"market": a, "game": b, "referee": c, "committee": d})
    assert (registry.market(), registry.game(), registry.referee(), registry.committee()) == (a, b, c, d)
    assert _is_module(registry, d)  # the committee locks and slashes its members' stake
    with reverts("MarketAlreadySet", market=a):
        registry.set_market(env.deployer, c, b, a)


def test_lock_unlock_slash_rules(env: Env) -> None:
    registry = _registry_with_eoa_modules(env)
    market, game, referee = env.nodes[4:7]
    registry.set_market(env.deployer, market, game, referee)
    node, stranger = env.nodes[0], env.nodes[1]
    with reverts("NotRegistered", node=stranger):
        registry.lock(market, stranger, 1)
    registry.register(node, KEY_ID, ENDPOINT, 2 * ETHER)
    with reverts("InsufficientFreeStake", requested=2 * ETHER + 1, available=2 * ETHER):
        registry.lock(market, node, 2 * ETHER + 1)
    registry.lock(market, node, ETHER)
    with reverts("Panic", code=0x11):  # checked arithmetic: unlocking more than locked
        registry.unlock(market, node, ETHER + 1)
    with reverts("Panic", code=0x11):
        registry.slash(market, node, ETHER + 1)
    [event] = registry.events(registry.unlock(market, node, ETHER // 2))
    assert event.args == {"node": node, "amount": ETHER // 2, "locked": ETHER // 2}
    balance = env.client.balance(market)
    result = registry.slash(market, node, ETHER // 2)
    [event] = registry.events(result)
    assert event.args == {"node": node, "amount": ETHER // 2, "recipient": market}
    assert env.client.balance(market) == balance + ETHER // 2 - result.fee_wei
    info = registry.get_node(node)
    assert (info.stake, info.locked) == (ETHER + ETHER // 2, 0)
    # Below the minimum stake a node can no longer take on work.
    registry.request_withdrawal(node, ETHER)
    with reverts("StakeTooLow", sent=ETHER // 2, minimum=MIN_STAKE):
        registry.lock(market, node, 1)


def test_every_module_locks_unlocks_and_slashes(env: Env) -> None:
    """The game and the referee hold the same powers as the market (a committee seat locks
    stake, a lost dispute slashes it); a slash pays the module that called it. Locks of
    different modules add up on one node, and any module may release them."""
    registry = _registry_with_eoa_modules(env)
    modules = env.nodes[4:7]
    registry.set_market(env.deployer, *modules)
    node = env.nodes[0]
    registry.register(node, KEY_ID, ENDPOINT, 2 * ETHER)
    for module in modules:
        registry.lock(module, node, SLASH)
    assert registry.get_node(node).locked == 3 * SLASH
    with reverts("NotModule", caller=env.outsider):
        registry.lock(env.outsider, node, SLASH)
    for module in modules:
        balance = env.client.balance(module)
        result = registry.slash(module, node, SLASH // 2)
        assert env.client.balance(module) == balance + SLASH // 2 - result.fee_wei
        [event] = registry.events(result)
        assert event.args == {"node": node, "amount": SLASH // 2, "recipient": module}
    registry.unlock(modules[1], node, 3 * SLASH - 3 * (SLASH // 2))
    info = registry.get_node(node)
    assert (info.stake, info.locked) == (2 * ETHER - 3 * (SLASH // 2), 0)


def test_client_signs_for_local_accounts(env: Env) -> None:
    from eth_account import Account
    from eth_utils import keccak

    local = Account.from_key(keccak(b"vxla contract tests: local signer"))
    env.extra_addresses.append(local.address)
    env.client.transact(env.outsider, to=local.address, value=3 * ETHER)
    env.registry.register(local, KEY_ID, ENDPOINT, MIN_STAKE)
    env.registry.add_stake(local, 1)  # second nonce from the local count
    assert env.registry.get_node(local.address).stake == MIN_STAKE + 1
    assert env.client.nonces.next_nonce(local.address) == 2


def test_gas_cap_refuses_before_sending(env: Env) -> None:
    from node.chain import GasCapExceeded

    tight = ChainClient(env.w3, gas_cap=30_000)
    registry = NodeRegistry(tight, env.registry.address)
    try:
        registry.register(env.nodes[0], KEY_ID, ENDPOINT, MIN_STAKE)
    except GasCapExceeded as exc:
        assert exc.cap == 30_000 and exc.estimate > 30_000
    else:
        raise AssertionError("the cap did not stop the transaction")
    assert not env.registry.is_registered(env.nodes[0])
    assert tight.fees_paid == {}
