// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {DisputeGame, IReferee, Verdict} from "./DisputeGame.sol";
import {JobMarket} from "./JobMarket.sol";
import {NodeRegistry} from "./NodeRegistry.sol";

/// @title Committee
/// @notice The referee of docs/disputes.md that decides a dispute's one instruction by a
/// committee: when the game refers an instruction, `size` members are drawn from the registry's
/// nodes by chain randomness of that block, skipping the two parties and nodes without
/// `memberStake` of free stake (at most MAX_SCAN candidates are looked at), and each member's
/// `memberStake` is locked. Members re-execute the instruction from its operands and vote the
/// output digest they computed before the vote deadline. Once all voted, or the deadline
/// passed, anyone calls `resolve`: the defender is right when more than half of the votes cast
/// equal its digest, wrong when more than half differ from it, and otherwise (no vote, a tie)
/// there is no verdict. Members on the deciding side (every voter when there is no verdict) get
/// their stake back and share the stake of the others, which is slashed; with nobody to share
/// it, it goes to the challenger. Deployed beside a StepReferee, the committee is its fallback:
/// it rules on the instructions the step referee cannot evaluate, and answers it.
contract Committee is IReferee {
    /// @notice Most registry entries looked at in one draw; bounds the draw's gas.
    uint256 public constant MAX_SCAN = 64;

    /// @notice One committee.
    struct Panel {
        address defender;
        address challenger;
        bytes32 defenderLeaf;
        uint64 deadline; // votes strictly before this time
        uint8 cast; // votes cast
        bool resolved;
        address[] members;
        bytes32[] votes;
        bool[] voted;
    }

    error NotReferrer(address caller);
    error UnknownPanel(uint256 disputeId);
    error NotMember(uint256 disputeId, address caller);
    error AlreadyVoted(uint256 disputeId, address member);
    error VotingOver(uint256 disputeId, uint64 deadline);
    error VotingNotOver(uint256 disputeId, uint64 deadline);
    error AlreadyResolved(uint256 disputeId);
    error UnexpectedEther(address from);
    error Reentrancy();

    event CommitteeDrawn(
        uint256 indexed disputeId,
        address[] members,
        uint64 deadline,
        uint32 index,
        bytes graphLeaf,
        bytes32[] operands,
        bytes32 defenderLeaf,
        bytes32 challengerLeaf
    );
    event Voted(uint256 indexed disputeId, address indexed member, bytes32 digest);
    event MemberPaid(uint256 indexed disputeId, address indexed member, uint256 amount);
    event MemberSlashed(uint256 indexed disputeId, address indexed member, uint256 amount);
    event CommitteeResolved(uint256 indexed disputeId, Verdict verdict, uint8 cast, uint8 forDefender);

    /// @notice The registry: where members come from, and the wiring of game and market.
    NodeRegistry public immutable registry;
    /// @notice Members drawn per dispute (fewer when the registry has fewer eligible nodes).
    uint8 public immutable size;
    /// @notice Stake locked per member, and slashed from a member outside the deciding side.
    uint256 public immutable memberStake;
    /// @notice Seconds the members have to vote.
    uint64 public immutable voteWindow;

    mapping(uint256 => Panel) private _panels;
    uint256 private _guard = 1;

    modifier nonReentrant() {
        if (_guard != 1) revert Reentrancy();
        _guard = 2;
        _;
        _guard = 1;
    }

    /// @param registry_ the NodeRegistry whose owner wires market, game and this referee
    /// @param size_ members per committee
    /// @param memberStake_ wei locked per member
    /// @param voteWindow_ seconds to vote
    constructor(NodeRegistry registry_, uint8 size_, uint256 memberStake_, uint64 voteWindow_) {
        registry = registry_;
        size = size_;
        memberStake = memberStake_;
        voteWindow = voteWindow_;
    }

    /// @notice Accepts slashed member stake from the registry only.
    receive() external payable {
        if (msg.sender != address(registry)) revert UnexpectedEther(msg.sender);
    }

    /// @inheritdoc IReferee
    function refer(
        uint256 disputeId,
        uint32 index,
        bytes calldata graphLeaf,
        bytes32[] calldata operands,
        bytes32 defenderLeaf,
        bytes32 challengerLeaf,
        address defender,
        address challenger
    ) external override nonReentrant {
        if (msg.sender != _referrer()) revert NotReferrer(msg.sender);
        Panel storage p = _panels[disputeId];
        p.defender = defender;
        p.challenger = challenger;
        p.defenderLeaf = defenderLeaf;
        p.deadline = uint64(block.timestamp) + voteWindow;
        _draw(p, disputeId);
        emit CommitteeDrawn(
            disputeId, p.members, p.deadline, index, graphLeaf, operands, defenderLeaf, challengerLeaf
        );
    }

    /// @notice A member's vote: the output digest it computed for the instruction.
    /// @param disputeId the dispute
    /// @param digest the member's output digest
    function vote(uint256 disputeId, bytes32 digest) external {
        Panel storage p = _panel(disputeId);
        if (p.resolved) revert AlreadyResolved(disputeId);
        if (block.timestamp >= p.deadline) revert VotingOver(disputeId, p.deadline);
        uint256 seat = _seat(p, disputeId, msg.sender);
        if (p.voted[seat]) revert AlreadyVoted(disputeId, msg.sender);
        p.voted[seat] = true;
        p.votes[seat] = digest;
        p.cast += 1;
        emit Voted(disputeId, msg.sender, digest);
    }

    /// @notice Tallies the votes, pays the members and hands the verdict to the game; anyone may
    /// call it once every member voted or the vote deadline passed.
    /// @param disputeId the dispute
    function resolve(uint256 disputeId) external nonReentrant {
        Panel storage p = _panel(disputeId);
        if (p.resolved) revert AlreadyResolved(disputeId);
        if (p.cast < p.members.length && block.timestamp < p.deadline) revert VotingNotOver(disputeId, p.deadline);
        p.resolved = true;
        uint8 forDefender = 0;
        for (uint256 i = 0; i < p.members.length; i++) {
            if (p.voted[i] && p.votes[i] == p.defenderLeaf) forDefender += 1;
        }
        Verdict verdict = Verdict.NoVerdict;
        if (uint256(forDefender) * 2 > p.cast) {
            verdict = Verdict.DefenderRight;
        } else if (uint256(p.cast - forDefender) * 2 > p.cast) {
            verdict = Verdict.DefenderWrong;
        }
        emit CommitteeResolved(disputeId, verdict, p.cast, forDefender);
        _pay(p, disputeId, verdict);
        // The game's decide, or the step referee's (same signature) when this is its fallback.
        DisputeGame(_referrer()).decide(disputeId, verdict);
    }

    /// @dev Who refers instructions to this committee and takes its rulings: the game when the
    /// committee is the registry's referee, else the registry's referee, whose fallback it is
    /// (StepReferee hands over what it cannot evaluate).
    function _referrer() private view returns (address) {
        address referee = registry.referee();
        return referee == address(this) ? registry.game() : referee;
    }

    /// @notice The committee of a dispute: members, their votes (zero when not voted) and
    /// whether each voted, the defender's digest, the vote deadline and whether it resolved.
    /// @param disputeId the dispute
    function getPanel(uint256 disputeId) external view returns (Panel memory) {
        return _panel(disputeId);
    }

    // --- internals ----------------------------------------------------------------------------

    function _panel(uint256 disputeId) private view returns (Panel storage p) {
        p = _panels[disputeId];
        if (p.deadline == 0) revert UnknownPanel(disputeId);
    }

    function _seat(Panel storage p, uint256 disputeId, address member) private view returns (uint256) {
        for (uint256 i = 0; i < p.members.length; i++) {
            if (p.members[i] == member) return i;
        }
        revert NotMember(disputeId, member);
    }

    /// @dev Draws up to `size` members, starting at a random entry of the registry's node list
    /// and going round it: randomness of this block (prevrandao and the previous block hash),
    /// made after the challenge, so neither party chose it when it committed.
    function _draw(Panel storage p, uint256 disputeId) private {
        uint256 count = registry.nodeCount();
        if (count == 0) return;
        uint256 start = uint256(keccak256(abi.encode(block.prevrandao, blockhash(block.number - 1), disputeId))) % count;
        uint256 scan = count < MAX_SCAN ? count : MAX_SCAN;
        uint256 minStake = registry.minStake();
        for (uint256 t = 0; t < scan && p.members.length < size; t++) {
            address candidate = registry.nodeAt((start + t) % count);
            if (candidate == p.defender || candidate == p.challenger) continue;
            NodeRegistry.Node memory n = registry.getNode(candidate);
            if (n.stake < minStake || n.stake - n.locked < memberStake) continue;
            p.members.push(candidate);
            p.votes.push(bytes32(0));
            p.voted.push(false);
            registry.lock(candidate, memberStake);
        }
    }

    /// @dev Unlocks the deciding side's stake and slashes the rest, whose stake the deciding
    /// side shares (the first of them also gets the remainder); without a deciding side, the
    /// challenger gets it.
    function _pay(Panel storage p, uint256 disputeId, Verdict verdict) private {
        uint256 m = p.members.length;
        bool[] memory kept = new bool[](m);
        uint256 keepers = 0;
        for (uint256 i = 0; i < m; i++) {
            bool forDefender = p.votes[i] == p.defenderLeaf;
            kept[i] = p.voted[i]
                && (verdict == Verdict.NoVerdict || (verdict == Verdict.DefenderRight) == forDefender);
            if (kept[i]) keepers += 1;
        }
        uint256 pot = (m - keepers) * memberStake;
        for (uint256 i = 0; i < m; i++) {
            if (kept[i]) {
                registry.unlock(p.members[i], memberStake);
            } else {
                emit MemberSlashed(disputeId, p.members[i], memberStake);
                registry.slash(p.members[i], memberStake);
            }
        }
        if (pot == 0) return;
        JobMarket market = JobMarket(payable(registry.market()));
        if (keepers == 0) {
            market.credit{value: pot}(p.challenger);
            return;
        }
        uint256 share = pot / keepers;
        uint256 remainder = pot - share * keepers;
        for (uint256 i = 0; i < m; i++) {
            if (!kept[i]) continue;
            uint256 amount = share + remainder;
            remainder = 0;
            emit MemberPaid(disputeId, p.members[i], amount);
            market.credit{value: amount}(p.members[i]);
        }
    }
}
