// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {NodeRegistry} from "./NodeRegistry.sol";

import {Commitments} from "./Commitments.sol";

/// @title JobMarket
/// @notice Submitters post ML jobs (program and inputs digests, and the graph commitment of
/// docs/disputes.md) with a reward in escrow, a redundancy k and a challenge window. Registered
/// nodes claim up to k slots, commit a sealed result
/// keccak256(abi.encode(node, jobId, resultDigest, opTraceRoot)) before the commit deadline,
/// then reveal the result digest, the trace digest and the op-trace Merkle root before the
/// reveal deadline. Until the challenge deadline (the end of the reveal phase plus the job's
/// challenge window) any registered node or the submitter may challenge a revealed slot in the
/// DisputeGame; a dispute the defender loses *refutes* its slot. A job with k = 1 is
/// optimistic: one execution, final after the window unless refuted.
///
/// Settlement rules, once the challenge deadline passed and no dispute is open (ether is never
/// created or lost):
/// - the survivors are the slots that revealed and that no dispute refuted or left undecided
///   (a referee without a verdict: fail closed); the result digest revealed by a strict
///   majority of the survivors wins;
/// - with a winner, the pool (reward plus every slash of this job made at finalize) is split
///   evenly between the winning slots; the first winning slot (claim order) also gets the
///   division remainder; without a winner the submitter gets the pool;
/// - a slot that never revealed is slashed `slashAmount`; with a winner, so is every survivor
///   that revealed another digest; a refuted slot was slashed by its dispute, whose winner got
///   that stake; an undecided slot is not slashed.
/// Every payout is a credit pulled with withdraw().
contract JobMarket {
    /// @notice Largest redundancy a job may ask for; bounds the loops in finalize.
    uint8 public constant MAX_K = 16;
    /// @notice Longest challenge window a job may ask for: its slots' stake stays locked that
    /// long after the reveals, and the deadline must fit its uint64.
    uint64 public constant MAX_CHALLENGE_WINDOW = 30 days;

    enum Phase {
        None,
        Open,
        Finalized
    }

    /// @notice One posted job.
    struct Job {
        address submitter;
        bytes32 programDigest;
        bytes32 inputsDigest;
        bytes32 graphRoot; // the graph commitment (docs/disputes.md)
        uint256 reward; // escrowed msg.value of postJob
        uint64 commitDeadline; // commits strictly before this time
        uint64 revealDeadline; // reveals strictly before this time
        uint64 challengeWindow; // seconds after the reveal phase in which challenges open
        uint64 revealEnd; // when the k-th slot revealed (0: not all did), ending the reveal phase
        uint32 traceLeaves; // n: op-trace leaves of the graph (its records are n + 1)
        uint8 k; // redundancy: number of slots
        uint8 claimed; // slots claimed so far
        uint8 committed; // slots committed so far
        uint8 revealed; // slots revealed so far
        uint16 openDisputes; // disputes on this job not yet settled
        Phase phase;
        bool accepted; // a strict majority of the survivors was reached
        bytes32 result; // the winning result digest, when accepted
    }

    /// @notice One claimed slot of a job.
    struct Slot {
        address node;
        bytes32 seal; // keccak256(abi.encode(node, jobId, resultDigest, opTraceRoot))
        bytes32 resultDigest;
        bytes32 traceDigest;
        bytes32 opTraceRoot; // Merkle root of the op-level trace (attest/merkle.py)
        bool committed;
        bool revealed;
        bool refuted; // a dispute found this slot's execution wrong
        bool undecided; // a dispute on this slot ended without a verdict: it cannot carry the job
    }

    /// @notice What the DisputeGame needs of a challenged slot.
    struct Target {
        address defender;
        address submitter;
        bytes32 resultDigest;
        bytes32 opTraceRoot;
        bytes32 graphRoot;
        uint32 traceLeaves;
        uint64 challengeDeadline;
    }

    error NotRegistered(address node);
    error BadRedundancy(uint8 k, uint8 maxK);
    error NoReward();
    error BadDeadlines(uint64 commitDeadline, uint64 revealDeadline, uint64 nowTime);
    error ChallengeWindowTooShort(uint64 challengeWindow, uint64 minimum);
    error ChallengeWindowTooLong(uint64 challengeWindow, uint64 maximum);
    error UnknownJob(uint256 jobId);
    error JobFinalized(uint256 jobId);
    error CommitPhaseOver(uint256 jobId, uint64 commitDeadline);
    error AllSlotsClaimed(uint256 jobId, uint8 k);
    error AlreadyClaimed(uint256 jobId, address node);
    error NoSlot(uint256 jobId, address node);
    error AlreadyCommitted(uint256 jobId, address node);
    error EmptySeal();
    error CommitPhaseNotOver(uint256 jobId, uint64 commitDeadline);
    error RevealPhaseOver(uint256 jobId, uint64 revealDeadline);
    error NotCommitted(uint256 jobId, address node);
    error AlreadyRevealed(uint256 jobId, address node);
    error SealMismatch(uint256 jobId, address node, bytes32 expected, bytes32 actual);
    error NotEmptyTrace(uint256 jobId, bytes32 opTraceRoot);
    error ChallengeWindowOpen(uint256 jobId, uint64 challengeDeadline);
    error DisputesOpen(uint256 jobId, uint16 openDisputes);
    error NoSuchSlot(uint256 jobId, uint8 slot);
    error NotRevealed(uint256 jobId, uint8 slot);
    error SlotRefuted(uint256 jobId, uint8 slot);
    error ChallengeWindowOver(uint256 jobId, uint64 challengeDeadline);
    error NotModule(address caller);
    error NothingToWithdraw(address account);
    error TransferFailed(address to, uint256 amount);
    error UnexpectedEther(address from);
    error Reentrancy();

    event JobPosted(
        uint256 indexed jobId,
        address indexed submitter,
        bytes32 programDigest,
        bytes32 inputsDigest,
        uint256 reward,
        uint8 k,
        uint64 commitDeadline,
        uint64 revealDeadline
    );
    event JobCommitment(uint256 indexed jobId, bytes32 graphRoot, uint32 traceLeaves, uint64 challengeWindow);
    event SlotClaimed(uint256 indexed jobId, address indexed node, uint8 slot);
    event Committed(uint256 indexed jobId, address indexed node, bytes32 seal);
    event Revealed(
        uint256 indexed jobId, address indexed node, bytes32 resultDigest, bytes32 traceDigest, bytes32 opTraceRoot
    );
    event Refuted(uint256 indexed jobId, address indexed node, uint8 slot, address indexed challenger, uint256 amount);
    event Slashed(uint256 indexed jobId, address indexed node, uint256 amount);
    event Rewarded(uint256 indexed jobId, address indexed node, uint256 amount);
    event Refunded(uint256 indexed jobId, address indexed submitter, uint256 amount);
    event Finalized(uint256 indexed jobId, bool accepted, bytes32 resultDigest, uint8 winners, uint8 revealed, uint256 pool);
    event Credited(address indexed account, uint256 amount, address indexed by);
    event Withdrawn(address indexed account, uint256 amount);

    /// @notice The registry holding node stakes, and the wiring of this deployment's modules.
    NodeRegistry public immutable registry;
    /// @notice Stake locked per claimed slot, and taken from a slot that loses or never reveals.
    uint256 public immutable slashAmount;
    /// @notice Shortest challenge window a job may ask for.
    uint64 public immutable minChallengeWindow;
    /// @notice Number of jobs posted; job ids are 1..jobCount.
    uint256 public jobCount;
    /// @notice Ether owed to each account, pulled with withdraw().
    mapping(address => uint256) public credits;

    mapping(uint256 => Job) private _jobs;
    mapping(uint256 => Slot[]) private _slots;
    mapping(uint256 => mapping(address => uint8)) private _slotIndex; // slot index + 1; 0 = none
    uint256 private _guard = 1;

    modifier nonReentrant() {
        if (_guard != 1) revert Reentrancy();
        _guard = 2;
        _;
        _guard = 1;
    }

    modifier onlyGame() {
        if (msg.sender != registry.game()) revert NotModule(msg.sender);
        _;
    }

    /// @param registry_ the NodeRegistry (its owner then calls setMarket with this address)
    /// @param slashAmount_ wei locked per slot and slashed on a wrong or missing reveal
    /// @param minChallengeWindow_ shortest challenge window in seconds a job may ask for
    constructor(NodeRegistry registry_, uint256 slashAmount_, uint64 minChallengeWindow_) {
        registry = registry_;
        slashAmount = slashAmount_;
        minChallengeWindow = minChallengeWindow_;
    }

    /// @notice Accepts slashed stake from the registry only (it is credited at once).
    receive() external payable {
        if (msg.sender != address(registry)) revert UnexpectedEther(msg.sender);
    }

    /// @notice Posts a job; msg.value is the reward, held in escrow until finalize.
    /// @param programDigest digest of the HLO program
    /// @param inputsDigest digest of the inputs
    /// @param graphRoot the graph commitment of the optimized program (docs/disputes.md)
    /// @param traceLeaves n, the number of op-trace leaves of that graph
    /// @param k redundancy: number of independent executions, 1..MAX_K (1: optimistic)
    /// @param commitDeadline commits are accepted strictly before this time
    /// @param revealDeadline reveals are accepted strictly before this time (> commitDeadline)
    /// @param challengeWindow seconds after the reveal phase in which results may be challenged
    /// @return jobId the new job's id (also in the JobPosted event)
    function postJob(
        bytes32 programDigest,
        bytes32 inputsDigest,
        bytes32 graphRoot,
        uint32 traceLeaves,
        uint8 k,
        uint64 commitDeadline,
        uint64 revealDeadline,
        uint64 challengeWindow
    ) external payable returns (uint256 jobId) {
        if (k == 0 || k > MAX_K) revert BadRedundancy(k, MAX_K);
        if (msg.value == 0) revert NoReward();
        if (commitDeadline <= block.timestamp || revealDeadline <= commitDeadline) {
            revert BadDeadlines(commitDeadline, revealDeadline, uint64(block.timestamp));
        }
        if (challengeWindow < minChallengeWindow) revert ChallengeWindowTooShort(challengeWindow, minChallengeWindow);
        if (challengeWindow > MAX_CHALLENGE_WINDOW) revert ChallengeWindowTooLong(challengeWindow, MAX_CHALLENGE_WINDOW);
        // The challenge deadline (reveal deadline plus window) must fit in a uint64, or every
        // later finalize would revert and the escrow and the slots' stake stay locked for good.
        if (revealDeadline > type(uint64).max - challengeWindow) {
            revert BadDeadlines(commitDeadline, revealDeadline, uint64(block.timestamp));
        }
        jobId = jobCount + 1;
        jobCount = jobId;
        Job storage j = _jobs[jobId];
        j.submitter = msg.sender;
        j.programDigest = programDigest;
        j.inputsDigest = inputsDigest;
        j.graphRoot = graphRoot;
        j.traceLeaves = traceLeaves;
        j.reward = msg.value;
        j.commitDeadline = commitDeadline;
        j.revealDeadline = revealDeadline;
        j.challengeWindow = challengeWindow;
        j.k = k;
        j.phase = Phase.Open;
        emit JobPosted(jobId, msg.sender, programDigest, inputsDigest, msg.value, k, commitDeadline, revealDeadline);
        emit JobCommitment(jobId, graphRoot, traceLeaves, challengeWindow);
    }

    /// @notice Claims one of the job's k slots for msg.sender, locking slashAmount of its stake.
    /// @param jobId the job
    function claimSlot(uint256 jobId) external nonReentrant {
        Job storage j = _openJob(jobId);
        if (block.timestamp >= j.commitDeadline) revert CommitPhaseOver(jobId, j.commitDeadline);
        if (!registry.isRegistered(msg.sender)) revert NotRegistered(msg.sender);
        if (_slotIndex[jobId][msg.sender] != 0) revert AlreadyClaimed(jobId, msg.sender);
        if (j.claimed >= j.k) revert AllSlotsClaimed(jobId, j.k);
        uint8 slot = j.claimed;
        j.claimed = slot + 1;
        _slotIndex[jobId][msg.sender] = slot + 1;
        Slot storage s = _slots[jobId].push();
        s.node = msg.sender;
        emit SlotClaimed(jobId, msg.sender, slot);
        // The registry is a trusted contract of this deployment; it reverts if the free stake
        // is short, which undoes the claim above.
        registry.lock(msg.sender, slashAmount);
    }

    /// @notice Commits the sealed result of msg.sender's slot.
    /// @param jobId the job
    /// @param seal keccak256(abi.encode(msg.sender, jobId, resultDigest, opTraceRoot))
    function commit(uint256 jobId, bytes32 seal) external {
        Job storage j = _openJob(jobId);
        if (block.timestamp >= j.commitDeadline) revert CommitPhaseOver(jobId, j.commitDeadline);
        Slot storage s = _slotOf(jobId, msg.sender);
        if (s.committed) revert AlreadyCommitted(jobId, msg.sender);
        if (seal == bytes32(0)) revert EmptySeal();
        s.committed = true;
        s.seal = seal;
        j.committed += 1;
        emit Committed(jobId, msg.sender, seal);
    }

    /// @notice Reveals the result, the trace digest and the op-trace root behind msg.sender's
    /// seal. Allowed once the commit phase is over (the commit deadline passed, or all k slots
    /// committed) and before the reveal deadline.
    /// @param jobId the job
    /// @param resultDigest digest of the outputs
    /// @param traceDigest digest of the signed execution trace
    /// @param opTraceRoot Merkle root of the op-level trace's n instruction digests
    function reveal(uint256 jobId, bytes32 resultDigest, bytes32 traceDigest, bytes32 opTraceRoot) external {
        Job storage j = _openJob(jobId);
        if (block.timestamp < j.commitDeadline && j.committed < j.k) {
            revert CommitPhaseNotOver(jobId, j.commitDeadline);
        }
        if (block.timestamp >= j.revealDeadline) revert RevealPhaseOver(jobId, j.revealDeadline);
        Slot storage s = _slotOf(jobId, msg.sender);
        if (!s.committed) revert NotCommitted(jobId, msg.sender);
        if (s.revealed) revert AlreadyRevealed(jobId, msg.sender);
        bytes32 expected = sealOf(msg.sender, jobId, resultDigest, opTraceRoot);
        if (expected != s.seal) revert SealMismatch(jobId, msg.sender, s.seal, expected);
        // A graph without traced instructions has the empty tree's root, and no other.
        if (j.traceLeaves == 0 && opTraceRoot != Commitments.EMPTY_ROOT) revert NotEmptyTrace(jobId, opTraceRoot);
        s.revealed = true;
        s.resultDigest = resultDigest;
        s.traceDigest = traceDigest;
        s.opTraceRoot = opTraceRoot;
        j.revealed += 1;
        if (j.revealed == j.k) j.revealEnd = uint64(block.timestamp);
        emit Revealed(jobId, msg.sender, resultDigest, traceDigest, opTraceRoot);
    }

    /// @notice Settles a job; anyone may call it once the challenge deadline passed and no
    /// dispute on it is open. See the contract notice for the rules. Payouts become credits.
    /// @param jobId the job
    function finalize(uint256 jobId) external nonReentrant {
        Job storage j = _openJob(jobId);
        uint64 deadline = _challengeDeadline(j);
        if (block.timestamp < deadline) revert ChallengeWindowOpen(jobId, deadline);
        if (j.openDisputes != 0) revert DisputesOpen(jobId, j.openDisputes);
        (bytes32 winner, uint8 winners) = _tally(jobId);
        bool accepted = winners > 0;

        // Effects: decide every slash and the pool before any external call.
        Slot[] storage slots = _slots[jobId];
        uint256 n = slots.length;
        bool[] memory slashed = new bool[](n);
        uint256 slashes = 0;
        for (uint256 i = 0; i < n; i++) {
            Slot storage s = slots[i];
            if (!s.revealed || (_survives(s) && accepted && s.resultDigest != winner)) {
                slashed[i] = true;
                slashes += 1;
            }
        }
        uint256 pool = j.reward + slashes * slashAmount;
        j.phase = Phase.Finalized;
        j.accepted = accepted;
        j.result = winner;
        if (accepted) {
            _creditWinners(jobId, winner, winners, pool);
        } else {
            credits[j.submitter] += pool;
            emit Refunded(jobId, j.submitter, pool);
        }
        for (uint256 i = 0; i < n; i++) {
            if (slashed[i]) emit Slashed(jobId, slots[i].node, slashAmount);
        }
        emit Finalized(jobId, accepted, winner, winners, j.revealed, pool);

        // Interactions with the trusted registry: release every lock still held (a refuted
        // slot's went with its dispute), and move slashed stake here so that the credits above
        // are backed by this contract's balance.
        for (uint256 i = 0; i < n; i++) {
            if (slashed[i]) {
                registry.slash(slots[i].node, slashAmount);
            } else if (!slots[i].refuted) {
                registry.unlock(slots[i].node, slashAmount);
            }
        }
    }

    // --- the dispute game's side ----------------------------------------------------------

    /// @notice Opens a dispute on a revealed, unrefuted slot before the challenge deadline, and
    /// returns what the game checks against (game only).
    /// @param jobId the job
    /// @param slot the challenged slot (claim order)
    function openDispute(uint256 jobId, uint8 slot) external onlyGame returns (Target memory t) {
        Job storage j = _openJob(jobId);
        if (slot >= _slots[jobId].length) revert NoSuchSlot(jobId, slot);
        Slot storage s = _slots[jobId][slot];
        if (!s.revealed) revert NotRevealed(jobId, slot);
        if (s.refuted) revert SlotRefuted(jobId, slot);
        uint64 deadline = _challengeDeadline(j);
        if (block.timestamp >= deadline) revert ChallengeWindowOver(jobId, deadline);
        j.openDisputes += 1;
        t = Target(s.node, j.submitter, s.resultDigest, s.opTraceRoot, j.graphRoot, j.traceLeaves, deadline);
    }

    /// @notice Closes a dispute (game only). With `refute`, the slot is refuted: its locked
    /// stake is slashed and credited to `challenger`, unless an earlier dispute refuted it
    /// already. With `undecided` (no verdict), the slot can no longer carry the job but keeps
    /// its stake. msg.value (the bond) is credited to `bondTo`.
    /// @param jobId the job
    /// @param slot the challenged slot
    /// @param refute whether the defender lost
    /// @param undecided whether the referee gave no verdict
    /// @param challenger who gets the slashed stake
    /// @param bondTo who gets the bond sent with this call
    function closeDispute(uint256 jobId, uint8 slot, bool refute, bool undecided, address challenger, address bondTo)
        external
        payable
        onlyGame
        nonReentrant
    {
        Job storage j = _jobs[jobId];
        j.openDisputes -= 1;
        if (msg.value > 0) _credit(bondTo, msg.value);
        Slot storage s = _slots[jobId][slot];
        if (undecided) s.undecided = true;
        if (!refute || s.refuted) return;
        s.refuted = true;
        _credit(challenger, slashAmount);
        emit Refuted(jobId, s.node, slot, challenger, slashAmount);
        registry.slash(s.node, slashAmount);
    }

    /// @notice Credits msg.value to `account` (modules only: the game's bonds, the referee's
    /// member stakes), so that every payout of the deployment is pulled from one place.
    /// @param account who may withdraw it
    function credit(address account) external payable {
        if (!registry.isModule(msg.sender)) revert NotModule(msg.sender);
        _credit(account, msg.value);
    }

    function _credit(address account, uint256 amount) private {
        credits[account] += amount;
        emit Credited(account, amount, msg.sender);
    }

    /// @dev Whether a slot counts in the tally: revealed, and no dispute refuted it or left it
    /// undecided.
    function _survives(Slot storage s) private view returns (bool) {
        return s.revealed && !s.refuted && !s.undecided;
    }

    /// @dev The digest revealed by more than half of the surviving slots and how many revealed
    /// it; (0, 0) without one. At most one digest can have one.
    function _tally(uint256 jobId) private view returns (bytes32 winner, uint8 winners) {
        Slot[] storage slots = _slots[jobId];
        uint256 n = slots.length;
        uint256 survivors = 0;
        for (uint256 i = 0; i < n; i++) {
            if (_survives(slots[i])) survivors += 1;
        }
        for (uint256 a = 0; a < n; a++) {
            if (!_survives(slots[a])) continue;
            uint8 count = 0;
            for (uint256 b = 0; b < n; b++) {
                if (_survives(slots[b]) && slots[b].resultDigest == slots[a].resultDigest) count += 1;
            }
            if (uint256(count) * 2 > survivors) return (slots[a].resultDigest, count);
        }
        return (bytes32(0), 0);
    }

    /// @dev Splits `pool` evenly between the surviving slots that revealed `winner`; the first of
    /// them in claim order also gets the division remainder, so the credits add up to `pool`.
    function _creditWinners(uint256 jobId, bytes32 winner, uint8 winners, uint256 pool) private {
        Slot[] storage slots = _slots[jobId];
        uint256 share = pool / winners;
        uint256 remainder = pool - share * winners;
        for (uint256 i = 0; i < slots.length; i++) {
            if (_survives(slots[i]) && slots[i].resultDigest == winner) {
                uint256 amount = share + remainder;
                remainder = 0;
                credits[slots[i].node] += amount;
                emit Rewarded(jobId, slots[i].node, amount);
            }
        }
    }

    /// @notice Pays out the caller's credits (rewards, refunds, bonds, slashes won) (pull).
    function withdraw() external nonReentrant {
        uint256 amount = credits[msg.sender];
        if (amount == 0) revert NothingToWithdraw(msg.sender);
        credits[msg.sender] = 0;
        emit Withdrawn(msg.sender, amount);
        (bool ok,) = payable(msg.sender).call{value: amount}("");
        if (!ok) revert TransferFailed(msg.sender, amount);
    }

    /// @notice The seal a node commits: keccak256(abi.encode(node, jobId, resultDigest, opTraceRoot)).
    /// @param node the operator
    /// @param jobId the job
    /// @param resultDigest digest of the outputs
    /// @param opTraceRoot Merkle root of the op-level trace
    function sealOf(address node, uint256 jobId, bytes32 resultDigest, bytes32 opTraceRoot)
        public
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(node, jobId, resultDigest, opTraceRoot));
    }

    /// @notice The job record.
    /// @param jobId the job
    function getJob(uint256 jobId) external view returns (Job memory) {
        if (_jobs[jobId].phase == Phase.None) revert UnknownJob(jobId);
        return _jobs[jobId];
    }

    /// @notice The claimed slots of a job, in claim order.
    /// @param jobId the job
    function getSlots(uint256 jobId) external view returns (Slot[] memory) {
        if (_jobs[jobId].phase == Phase.None) revert UnknownJob(jobId);
        return _slots[jobId];
    }

    /// @notice When challenges on the job close: the end of the reveal phase (the k-th reveal,
    /// or the reveal deadline) plus the job's challenge window.
    /// @param jobId the job
    function challengeDeadline(uint256 jobId) external view returns (uint64) {
        if (_jobs[jobId].phase == Phase.None) revert UnknownJob(jobId);
        return _challengeDeadline(_jobs[jobId]);
    }

    function _challengeDeadline(Job storage j) private view returns (uint64) {
        uint64 end = j.revealEnd != 0 ? j.revealEnd : j.revealDeadline;
        return end + j.challengeWindow;
    }

    function _openJob(uint256 jobId) private view returns (Job storage j) {
        j = _jobs[jobId];
        if (j.phase == Phase.None) revert UnknownJob(jobId);
        if (j.phase == Phase.Finalized) revert JobFinalized(jobId);
    }

    function _slotOf(uint256 jobId, address node) private view returns (Slot storage) {
        uint8 index = _slotIndex[jobId][node];
        if (index == 0) revert NoSlot(jobId, node);
        return _slots[jobId][index - 1];
    }
}
