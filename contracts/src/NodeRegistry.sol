// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

/// @title NodeRegistry
/// @notice Operators of vxla nodes register here with their Ed25519 attestation key id, an
/// endpoint URL and a stake in native ether. The stake backs their work in the JobMarket:
/// the market locks a part of it per claimed job slot and slashes it when the node reveals a
/// result the job rejects, or never reveals; the dispute game slashes a slot a dispute refutes,
/// and the referee locks and slashes the stake of the committee members it draws. Free stake
/// leaves in two steps (request, then pull after the unbonding delay) so a node cannot escape
/// a slash by withdrawing first. The registry also lists its nodes in registration order, which
/// is where a referee draws committee members from.
contract NodeRegistry {
    /// @notice What the registry knows about one operator.
    struct Node {
        bytes32 keyId; // id of the Ed25519 key that signs the node's traces
        string endpoint; // URL where other nodes fetch blobs by digest
        uint256 stake; // bonded stake, including the locked part
        uint256 locked; // part of `stake` backing open job slots
        uint256 unbonding; // left `stake`; paid out by withdrawStake after `unlockAt`
        uint64 unlockAt; // time from which `unbonding` may be withdrawn
        bool registered;
    }

    error NotOwner(address caller);
    error MarketAlreadySet(address market);
    error ZeroAddress();
    error NotModule(address caller);
    error AlreadyRegistered(address node);
    error NotRegistered(address node);
    error StakeTooLow(uint256 sent, uint256 minimum);
    error EmptyKeyId();
    error EmptyEndpoint();
    error ZeroAmount();
    error InsufficientFreeStake(address node, uint256 requested, uint256 available);
    error NothingUnbonding(address node);
    error UnbondingNotOver(address node, uint64 unlockAt, uint64 nowTime);
    error TransferFailed(address to, uint256 amount);
    error Reentrancy();

    event MarketSet(address indexed market, address indexed game, address indexed referee, address committee);
    event NodeRegistered(address indexed node, bytes32 indexed keyId, string endpoint, uint256 stake);
    event EndpointUpdated(address indexed node, string endpoint);
    event StakeAdded(address indexed node, uint256 amount, uint256 stake);
    event WithdrawalRequested(address indexed node, uint256 amount, uint256 unbonding, uint64 unlockAt);
    event Withdrawn(address indexed node, uint256 amount);
    event StakeLocked(address indexed node, uint256 amount, uint256 locked);
    event StakeUnlocked(address indexed node, uint256 amount, uint256 locked);
    event Slashed(address indexed node, uint256 amount, address indexed recipient);

    /// @notice Smallest stake a node registers with, and must keep to claim job slots.
    uint256 public immutable minStake;
    /// @notice Seconds between a withdrawal request and the earliest pull.
    uint64 public immutable unbondingDelay;
    /// @notice The deployer, allowed only to wire the market once.
    address public immutable owner;
    /// @notice The JobMarket. It, the dispute game and the referee are this deployment's
    /// modules: the only callers allowed to lock, unlock and slash stake, and the market's
    /// credits.
    address public market;
    /// @notice The DisputeGame of the market's jobs.
    address public game;
    /// @notice The referee that decides a dispute's single instruction (the step referee, or
    /// the committee alone).
    address public referee;
    /// @notice The committee: the referee itself, or the step referee's fallback for what it
    /// cannot evaluate. It locks and slashes the stake of the members it draws.
    address public committee;

    mapping(address => Node) private _nodes;
    address[] private _nodeList;
    uint256 private _guard = 1;

    modifier nonReentrant() {
        if (_guard != 1) revert Reentrancy();
        _guard = 2;
        _;
        _guard = 1;
    }

    modifier onlyModule() {
        if (!isModule(msg.sender)) revert NotModule(msg.sender);
        _;
    }

    /// @param minStake_ minimum stake in wei to register and to claim slots
    /// @param unbondingDelay_ seconds a withdrawal request waits before the pull
    constructor(uint256 minStake_, uint64 unbondingDelay_) {
        minStake = minStake_;
        unbondingDelay = unbondingDelay_;
        owner = msg.sender;
    }

    /// @notice Wires the JobMarket, its DisputeGame, the game's referee and the committee;
    /// callable once, by the deployer.
    /// @param market_ address of the JobMarket contract
    /// @param game_ address of the DisputeGame contract
    /// @param referee_ address of the referee (StepReferee, or the Committee alone)
    /// @param committee_ address of the Committee (the referee itself, or its fallback)
    function setMarket(address market_, address game_, address referee_, address committee_) external {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        if (market != address(0)) revert MarketAlreadySet(market);
        if (market_ == address(0) || game_ == address(0) || referee_ == address(0) || committee_ == address(0)) {
            revert ZeroAddress();
        }
        market = market_;
        game = game_;
        referee = referee_;
        committee = committee_;
        emit MarketSet(market_, game_, referee_, committee_);
    }

    /// @notice Whether `account` is one of the wired modules (market, game, referee, committee).
    /// @param account the caller to check
    function isModule(address account) public view returns (bool) {
        return account != address(0)
            && (account == market || account == game || account == referee || account == committee);
    }

    /// @notice Registers msg.sender as a node operator, bonding msg.value as stake.
    /// @param keyId id of the node's Ed25519 attestation key (non-zero)
    /// @param endpoint URL of the node (non-empty)
    function register(bytes32 keyId, string calldata endpoint) external payable {
        Node storage n = _nodes[msg.sender];
        if (n.registered) revert AlreadyRegistered(msg.sender);
        if (keyId == bytes32(0)) revert EmptyKeyId();
        if (bytes(endpoint).length == 0) revert EmptyEndpoint();
        if (msg.value < minStake) revert StakeTooLow(msg.value, minStake);
        n.registered = true;
        n.keyId = keyId;
        n.endpoint = endpoint;
        n.stake = msg.value;
        _nodeList.push(msg.sender);
        emit NodeRegistered(msg.sender, keyId, endpoint, msg.value);
    }

    /// @notice Changes the endpoint URL of the calling node.
    /// @param endpoint the new URL (non-empty)
    function updateEndpoint(string calldata endpoint) external {
        Node storage n = _nodes[msg.sender];
        if (!n.registered) revert NotRegistered(msg.sender);
        if (bytes(endpoint).length == 0) revert EmptyEndpoint();
        n.endpoint = endpoint;
        emit EndpointUpdated(msg.sender, endpoint);
    }

    /// @notice Adds msg.value to the calling node's stake.
    function addStake() external payable {
        Node storage n = _nodes[msg.sender];
        if (!n.registered) revert NotRegistered(msg.sender);
        if (msg.value == 0) revert ZeroAmount();
        n.stake += msg.value;
        emit StakeAdded(msg.sender, msg.value, n.stake);
    }

    /// @notice Moves `amount` of free (unlocked) stake into unbonding; it can be pulled with
    /// withdrawStake once the unbonding delay has passed. A new request restarts the delay for
    /// everything still unbonding.
    /// @param amount wei to unbond, at most stake minus locked stake
    function requestWithdrawal(uint256 amount) external {
        Node storage n = _nodes[msg.sender];
        if (!n.registered) revert NotRegistered(msg.sender);
        if (amount == 0) revert ZeroAmount();
        uint256 free = n.stake - n.locked;
        if (amount > free) revert InsufficientFreeStake(msg.sender, amount, free);
        n.stake -= amount;
        n.unbonding += amount;
        n.unlockAt = uint64(block.timestamp) + unbondingDelay;
        emit WithdrawalRequested(msg.sender, amount, n.unbonding, n.unlockAt);
    }

    /// @notice Pays out the caller's unbonded stake once the unbonding delay is over (pull).
    function withdrawStake() external nonReentrant {
        Node storage n = _nodes[msg.sender];
        uint256 amount = n.unbonding;
        if (amount == 0) revert NothingUnbonding(msg.sender);
        if (block.timestamp < n.unlockAt) {
            revert UnbondingNotOver(msg.sender, n.unlockAt, uint64(block.timestamp));
        }
        n.unbonding = 0;
        emit Withdrawn(msg.sender, amount);
        (bool ok,) = payable(msg.sender).call{value: amount}("");
        if (!ok) revert TransferFailed(msg.sender, amount);
    }

    /// @notice Locks `amount` of the node's free stake behind a job slot or a committee seat
    /// (modules only).
    /// @param node the operator
    /// @param amount wei to lock
    function lock(address node, uint256 amount) external onlyModule {
        Node storage n = _nodes[node];
        if (!n.registered) revert NotRegistered(node);
        if (n.stake < minStake) revert StakeTooLow(n.stake, minStake);
        uint256 free = n.stake - n.locked;
        if (amount > free) revert InsufficientFreeStake(node, amount, free);
        n.locked += amount;
        emit StakeLocked(node, amount, n.locked);
    }

    /// @notice Releases `amount` of locked stake after a job or dispute settles (modules only).
    /// @param node the operator
    /// @param amount wei to unlock
    function unlock(address node, uint256 amount) external onlyModule {
        Node storage n = _nodes[node];
        n.locked -= amount; // checked: reverts if the modules unlock more than they locked
        emit StakeUnlocked(node, amount, n.locked);
    }

    /// @notice Takes `amount` of the node's locked stake and sends it to the calling module,
    /// which credits it to whoever the job or dispute pays (modules only).
    /// @param node the operator
    /// @param amount wei to slash, out of the stake the market locked
    function slash(address node, uint256 amount) external onlyModule nonReentrant {
        Node storage n = _nodes[node];
        n.locked -= amount;
        n.stake -= amount;
        emit Slashed(node, amount, msg.sender);
        (bool ok,) = payable(msg.sender).call{value: amount}("");
        if (!ok) revert TransferFailed(msg.sender, amount);
    }

    /// @notice Full record of a node.
    /// @param node the operator
    function getNode(address node) external view returns (Node memory) {
        return _nodes[node];
    }

    /// @notice Whether `node` is registered.
    /// @param node the operator
    function isRegistered(address node) external view returns (bool) {
        return _nodes[node].registered;
    }

    /// @notice Number of nodes ever registered (a node stays listed: registration is permanent).
    function nodeCount() external view returns (uint256) {
        return _nodeList.length;
    }

    /// @notice The node registered `index`-th (0-based, registration order).
    /// @param index position in 0..nodeCount()-1
    function nodeAt(uint256 index) external view returns (address) {
        return _nodeList[index];
    }

    /// @notice Stake that is neither locked nor unbonding.
    /// @param node the operator
    function freeStake(address node) external view returns (uint256) {
        Node storage n = _nodes[node];
        return n.stake - n.locked;
    }
}
