// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {NodeRegistry} from "./NodeRegistry.sol";

/// @title JobMarket
/// @notice Submitters post ML jobs (program and inputs digests) with a reward in escrow and a
/// redundancy k. Registered nodes claim up to k slots, commit a sealed result
/// keccak256(abi.encode(node, jobId, resultDigest)) before the commit deadline, then reveal
/// the result and trace digests before the reveal deadline. Finalization settles by quorum:
/// the result digest revealed by a strict majority of the k slots wins.
///
/// Settlement rules (ether is never created or lost):
/// - with a winner, the pool (reward plus every slash of this job) is split evenly between
///   the winning slots; the first winning slot (claim order) also gets the division remainder;
/// - without a strict majority, the pool (reward plus slashes) is credited to the submitter;
/// - a slot that revealed a digest other than the winner is slashed `slashAmount`;
/// - a slot that never revealed (claimed but not committed, or committed but not revealed) is
///   slashed `slashAmount`, with or without a winner;
/// - without a winner, nodes that revealed are not slashed (nobody can say who was wrong).
/// Every payout is a credit pulled with withdraw().
contract JobMarket {
    /// @notice Largest redundancy a job may ask for; bounds the loops in finalize.
    uint8 public constant MAX_K = 16;

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
        uint256 reward; // escrowed msg.value of postJob
        uint64 commitDeadline; // commits strictly before this time
        uint64 revealDeadline; // reveals strictly before this time
        uint8 k; // redundancy: number of slots
        uint8 claimed; // slots claimed so far
        uint8 committed; // slots committed so far
        uint8 revealed; // slots revealed so far
        Phase phase;
        bool accepted; // a strict majority was reached
        bytes32 result; // the winning result digest, when accepted
    }

    /// @notice One claimed slot of a job.
    struct Slot {
        address node;
        bytes32 seal; // keccak256(abi.encode(node, jobId, resultDigest))
        bytes32 resultDigest;
        bytes32 traceDigest;
        bool committed;
        bool revealed;
    }

    error NotRegistered(address node);
    error BadRedundancy(uint8 k, uint8 maxK);
    error NoReward();
    error BadDeadlines(uint64 commitDeadline, uint64 revealDeadline, uint64 nowTime);
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
    error RevealPhaseNotOver(uint256 jobId, uint64 revealDeadline);
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
    event SlotClaimed(uint256 indexed jobId, address indexed node, uint8 slot);
    event Committed(uint256 indexed jobId, address indexed node, bytes32 seal);
    event Revealed(uint256 indexed jobId, address indexed node, bytes32 resultDigest, bytes32 traceDigest);
    event Slashed(uint256 indexed jobId, address indexed node, uint256 amount);
    event Rewarded(uint256 indexed jobId, address indexed node, uint256 amount);
    event Refunded(uint256 indexed jobId, address indexed submitter, uint256 amount);
    event Finalized(uint256 indexed jobId, bool accepted, bytes32 resultDigest, uint8 winners, uint8 revealed, uint256 pool);
    event Withdrawn(address indexed account, uint256 amount);

    /// @notice The registry holding node stakes.
    NodeRegistry public immutable registry;
    /// @notice Stake locked per claimed slot, and taken from a slot that loses or never reveals.
    uint256 public immutable slashAmount;
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

    /// @param registry_ the NodeRegistry (its owner then calls setMarket with this address)
    /// @param slashAmount_ wei locked per slot and slashed on a wrong or missing reveal
    constructor(NodeRegistry registry_, uint256 slashAmount_) {
        registry = registry_;
        slashAmount = slashAmount_;
    }

    /// @notice Accepts slashed stake from the registry only (finalize credits it at once).
    receive() external payable {
        if (msg.sender != address(registry)) revert UnexpectedEther(msg.sender);
    }

    /// @notice Posts a job; msg.value is the reward, held in escrow until finalize.
    /// @param programDigest digest of the HLO program
    /// @param inputsDigest digest of the inputs
    /// @param k redundancy: number of independent executions, 1..MAX_K
    /// @param commitDeadline commits are accepted strictly before this time
    /// @param revealDeadline reveals are accepted strictly before this time (> commitDeadline)
    /// @return jobId the new job's id (also in the JobPosted event)
    function postJob(
        bytes32 programDigest,
        bytes32 inputsDigest,
        uint8 k,
        uint64 commitDeadline,
        uint64 revealDeadline
    ) external payable returns (uint256 jobId) {
        if (k == 0 || k > MAX_K) revert BadRedundancy(k, MAX_K);
        if (msg.value == 0) revert NoReward();
        if (commitDeadline <= block.timestamp || revealDeadline <= commitDeadline) {
            revert BadDeadlines(commitDeadline, revealDeadline, uint64(block.timestamp));
        }
        jobId = jobCount + 1;
        jobCount = jobId;
        Job storage j = _jobs[jobId];
        j.submitter = msg.sender;
        j.programDigest = programDigest;
        j.inputsDigest = inputsDigest;
        j.reward = msg.value;
        j.commitDeadline = commitDeadline;
        j.revealDeadline = revealDeadline;
        j.k = k;
        j.phase = Phase.Open;
        emit JobPosted(jobId, msg.sender, programDigest, inputsDigest, msg.value, k, commitDeadline, revealDeadline);
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
        _slots[jobId].push(Slot(msg.sender, bytes32(0), bytes32(0), bytes32(0), false, false));
        emit SlotClaimed(jobId, msg.sender, slot);
        // The registry is a trusted contract of this deployment; it reverts if the free stake
        // is short, which undoes the claim above.
        registry.lock(msg.sender, slashAmount);
    }

    /// @notice Commits the sealed result of msg.sender's slot.
    /// @param jobId the job
    /// @param seal keccak256(abi.encode(msg.sender, jobId, resultDigest))
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

    /// @notice Reveals the result and trace digests behind msg.sender's seal. Allowed once the
    /// commit phase is over (the commit deadline passed, or all k slots committed) and before
    /// the reveal deadline.
    /// @param jobId the job
    /// @param resultDigest digest of the outputs
    /// @param traceDigest digest of the signed execution trace
    function reveal(uint256 jobId, bytes32 resultDigest, bytes32 traceDigest) external {
        Job storage j = _openJob(jobId);
        if (block.timestamp < j.commitDeadline && j.committed < j.k) {
            revert CommitPhaseNotOver(jobId, j.commitDeadline);
        }
        if (block.timestamp >= j.revealDeadline) revert RevealPhaseOver(jobId, j.revealDeadline);
        Slot storage s = _slotOf(jobId, msg.sender);
        if (!s.committed) revert NotCommitted(jobId, msg.sender);
        if (s.revealed) revert AlreadyRevealed(jobId, msg.sender);
        bytes32 expected = sealOf(msg.sender, jobId, resultDigest);
        if (expected != s.seal) revert SealMismatch(jobId, msg.sender, s.seal, expected);
        s.revealed = true;
        s.resultDigest = resultDigest;
        s.traceDigest = traceDigest;
        j.revealed += 1;
        emit Revealed(jobId, msg.sender, resultDigest, traceDigest);
    }

    /// @notice Settles a job by quorum; anyone may call it once the reveal deadline passed or
    /// all k slots revealed. See the contract notice for the rules. Payouts become credits.
    /// @param jobId the job
    function finalize(uint256 jobId) external nonReentrant {
        Job storage j = _openJob(jobId);
        if (block.timestamp < j.revealDeadline && j.revealed < j.k) {
            revert RevealPhaseNotOver(jobId, j.revealDeadline);
        }
        (bytes32 winner, uint8 winners) = _tally(jobId, j.k);
        bool accepted = winners > 0;

        // Effects: decide every slash and the pool before any external call.
        Slot[] storage slots = _slots[jobId];
        uint256 n = slots.length;
        bool[] memory slashed = new bool[](n);
        uint256 slashes = 0;
        for (uint256 i = 0; i < n; i++) {
            if (!slots[i].revealed || (accepted && slots[i].resultDigest != winner)) {
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

        // Interactions with the trusted registry: release every lock, and move slashed stake
        // here so that the credits above are backed by this contract's balance.
        for (uint256 i = 0; i < n; i++) {
            if (slashed[i]) {
                registry.slash(slots[i].node, slashAmount);
            } else {
                registry.unlock(slots[i].node, slashAmount);
            }
        }
    }

    /// @dev The digest revealed by more than k/2 slots (of k slots, not of reveals) and how many
    /// slots revealed it; (0, 0) without a strict majority. At most one digest can have one.
    function _tally(uint256 jobId, uint8 k) private view returns (bytes32 winner, uint8 winners) {
        Slot[] storage slots = _slots[jobId];
        uint256 n = slots.length;
        for (uint256 a = 0; a < n; a++) {
            if (!slots[a].revealed) continue;
            uint8 count = 0;
            for (uint256 b = 0; b < n; b++) {
                if (slots[b].revealed && slots[b].resultDigest == slots[a].resultDigest) count += 1;
            }
            if (uint256(count) * 2 > k) return (slots[a].resultDigest, count);
        }
        return (bytes32(0), 0);
    }

    /// @dev Splits `pool` evenly between the slots that revealed `winner`; the first of them in
    /// claim order also gets the division remainder, so the credits add up to `pool` exactly.
    function _creditWinners(uint256 jobId, bytes32 winner, uint8 winners, uint256 pool) private {
        Slot[] storage slots = _slots[jobId];
        uint256 share = pool / winners;
        uint256 remainder = pool - share * winners;
        for (uint256 i = 0; i < slots.length; i++) {
            if (slots[i].revealed && slots[i].resultDigest == winner) {
                uint256 amount = share + remainder;
                remainder = 0;
                credits[slots[i].node] += amount;
                emit Rewarded(jobId, slots[i].node, amount);
            }
        }
    }

    /// @notice Pays out the caller's credits (rewards, refunds) (pull).
    function withdraw() external nonReentrant {
        uint256 amount = credits[msg.sender];
        if (amount == 0) revert NothingToWithdraw(msg.sender);
        credits[msg.sender] = 0;
        emit Withdrawn(msg.sender, amount);
        (bool ok,) = payable(msg.sender).call{value: amount}("");
        if (!ok) revert TransferFailed(msg.sender, amount);
    }

    /// @notice The seal a node commits: keccak256(abi.encode(node, jobId, resultDigest)).
    /// @param node the operator
    /// @param jobId the job
    /// @param resultDigest digest of the outputs
    function sealOf(address node, uint256 jobId, bytes32 resultDigest) public pure returns (bytes32) {
        return keccak256(abi.encode(node, jobId, resultDigest));
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
