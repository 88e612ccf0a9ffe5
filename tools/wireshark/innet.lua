-- innet.lua — a Wireshark/tshark dissector for innet packets: the innet base
-- header (include/innet/wire.h, docs/protocol.md) and the service headers
-- that follow it.
--
--   tshark -X lua_script:tools/wireshark/innet.lua -r capture.pcap \
--          -Y innet -T fields -e innet.service -e innet.counter.op
--   (or copy it into ~/.local/lib/wireshark/plugins/)
--
-- Found two ways:
--   * on UDP ports 9000 and 9100 (the examples' ports; more with
--     "Decode As…" or the innet.udp_ports preference), and
--   * heuristically on any UDP port: payload of at least 8 bytes whose first
--     byte is the magic 0x1E and second byte the version 1.
--
-- Services: the base header's service byte selects a sub-dissector in the
-- "innet.service" dissector table. This file registers the counter service
-- (1). Each later service (paxos = 2, agg = 3, dnn = 4, lb = 5) adds its own
-- section below, at the marked place: a Proto named "innet.<svc>", its
-- fields "innet.<svc>.<field>", and one `services:add(N, proto)` line.
--
-- All multi-byte fields are big-endian, as on the wire.

local INNET_MAGIC = 0x1E
local INNET_VERSION = 1
local BASE_LEN = 8

-- --------------------------------------------------------------------------
-- Base header

local innet = Proto("innet", "innet base header")

local service_names = {
	[0] = "raw",
	[1] = "counter",
	[2] = "paxos",
	[3] = "agg",
	[4] = "dnn",
	[5] = "lb",
}

local f = innet.fields
f.magic    = ProtoField.uint8("innet.magic", "Magic", base.HEX)
f.version  = ProtoField.uint8("innet.version", "Version", base.DEC)
f.service  = ProtoField.uint8("innet.service", "Service", base.DEC, service_names)
f.flags    = ProtoField.uint8("innet.flags", "Flags (service-defined)", base.HEX)
f.dst_node = ProtoField.uint16("innet.dst_node", "Destination node", base.DEC)
f.src_node = ProtoField.uint16("innet.src_node", "Source node", base.DEC)
f.payload  = ProtoField.bytes("innet.payload", "Payload")

local ex_bad_magic = ProtoExpert.new("innet.bad_magic.expert", "Not the innet magic 0x1E",
	expert.group.MALFORMED, expert.severity.ERROR)
local ex_bad_version = ProtoExpert.new("innet.bad_version.expert",
	"Unknown innet version: switches drop it (counted as bad_version)",
	expert.group.PROTOCOL, expert.severity.WARN)
local ex_short = ProtoExpert.new("innet.short.expert", "Shorter than its header",
	expert.group.MALFORMED, expert.severity.ERROR)
local ex_unknown_svc = ProtoExpert.new("innet.unknown_service.expert",
	"No dissector for this innet service", expert.group.UNDECODED, expert.severity.NOTE)
innet.experts = { ex_bad_magic, ex_bad_version, ex_short, ex_unknown_svc }

innet.prefs.udp_ports = Pref.range("UDP ports", "9000,9100",
	"UDP ports always decoded as innet (the heuristic finds the others)", 65535)

-- Sub-dissectors by the service byte.
local services = DissectorTable.new("innet.service", "innet service", ftypes.UINT8, base.DEC, innet)

-- Dissect the base header and hand the rest to the service's dissector.
-- Returns the number of bytes consumed (0: not innet).
function innet.dissector(tvb, pinfo, tree)
	local len = tvb:len()
	if len < 1 then
		return 0
	end
	pinfo.cols.protocol = "innet"
	local t = tree:add(innet, tvb(0, math.min(len, BASE_LEN)))
	if len < BASE_LEN then
		t:add_proto_expert_info(ex_short)
		pinfo.cols.info = "innet (truncated header)"
		return len
	end
	local magic = tvb(0, 1):uint()
	local version = tvb(1, 1):uint()
	local service = tvb(2, 1):uint()
	local dst = tvb(4, 2):uint()
	local src = tvb(6, 2):uint()
	local mi = t:add(f.magic, tvb(0, 1))
	if magic ~= INNET_MAGIC then
		mi:add_proto_expert_info(ex_bad_magic)
	end
	local vi = t:add(f.version, tvb(1, 1))
	t:add(f.service, tvb(2, 1))
	t:add(f.flags, tvb(3, 1))
	t:add(f.dst_node, tvb(4, 2))
	t:add(f.src_node, tvb(6, 2))
	local svc_name = service_names[service] or ("service " .. service)
	t:append_text(string.format(", %s, node %d -> %d", svc_name, src, dst))
	pinfo.cols.info = string.format("innet %s %d -> %d", svc_name, src, dst)
	if version ~= INNET_VERSION then
		vi:add_proto_expert_info(ex_bad_version)
		pinfo.cols.info:append(string.format(" (unknown version %d)", version))
		if len > BASE_LEN then
			t:add(f.payload, tvb(BASE_LEN))
		end
		return len
	end
	if len == BASE_LEN then
		return len
	end
	local rest = tvb(BASE_LEN):tvb()
	local used = services:try(service, rest, pinfo, tree)
	if used == nil or used == 0 then
		local pi = tree:add(f.payload, tvb(BASE_LEN))
		if service ~= 0 then
			pi:add_proto_expert_info(ex_unknown_svc)
		end
	end
	return len
end

-- Heuristic: magic and version, and room for the base header.
local function innet_heuristic(tvb, pinfo, tree)
	if tvb:len() < BASE_LEN then
		return false
	end
	if tvb(0, 1):uint() ~= INNET_MAGIC or tvb(1, 1):uint() ~= INNET_VERSION then
		return false
	end
	innet.dissector(tvb, pinfo, tree)
	return true
end

local udp_port = DissectorTable.get("udp.port")
local registered_ports = nil

local function register_ports()
	if registered_ports ~= nil then
		udp_port:remove(registered_ports, innet)
	end
	registered_ports = innet.prefs.udp_ports
	udp_port:add(registered_ports, innet)
end

function innet.prefs_changed()
	register_ports()
end

register_ports()
innet:register_heuristic("udp", innet_heuristic)

-- --------------------------------------------------------------------------
-- Service 1: counter (struct innet_counter_hdr, 16 bytes)
--
--   0       1       2       3       4               8                      16
--   | op    | status| reserved      | index (u32)   | value (u64)           |
--
-- op: 1 INC (value = delta), 2 READ; replies have 0x80 or'ed in and carry
-- the counter's value; status is meaningful in replies.

local COUNTER_LEN = 16
local counter = Proto("innet.counter", "innet counter service")

local counter_ops = {
	[0x01] = "INC",
	[0x02] = "READ",
	[0x81] = "INC reply",
	[0x82] = "READ reply",
}
local counter_status = {
	[0] = "OK",
	[1] = "BAD_INDEX",
	[2] = "BAD_OP",
}

local cf = counter.fields
cf.op       = ProtoField.uint8("innet.counter.op", "Operation", base.HEX, counter_ops)
cf.reply    = ProtoField.bool("innet.counter.reply", "Reply", 8, nil, 0x80)
cf.opcode   = ProtoField.uint8("innet.counter.opcode", "Opcode", base.DEC,
	{ [1] = "INC", [2] = "READ" }, 0x7F)
cf.status   = ProtoField.uint8("innet.counter.status", "Status", base.DEC, counter_status)
cf.reserved = ProtoField.uint16("innet.counter.reserved", "Reserved", base.HEX)
cf.index    = ProtoField.uint32("innet.counter.index", "Index", base.DEC)
cf.value    = ProtoField.uint64("innet.counter.value", "Value (INC: delta)", base.DEC)

local ex_counter_short = ProtoExpert.new("innet.counter.short.expert",
	"Counter header shorter than 16 bytes (the switch drops it as too_short)",
	expert.group.MALFORMED, expert.severity.ERROR)
local ex_counter_status = ProtoExpert.new("innet.counter.status.expert",
	"Counter reply reports an error", expert.group.RESPONSE_CODE, expert.severity.WARN)
counter.experts = { ex_counter_short, ex_counter_status }

function counter.dissector(tvb, pinfo, tree)
	local len = tvb:len()
	local t = tree:add(counter, tvb(0, math.min(len, COUNTER_LEN)))
	if len < COUNTER_LEN then
		t:add_proto_expert_info(ex_counter_short)
		return len
	end
	local op = tvb(0, 1):uint()
	local status = tvb(1, 1):uint()
	local index = tvb(4, 4):uint()
	local value = tvb(8, 8):uint64()
	local oi = t:add(cf.op, tvb(0, 1))
	oi:add(cf.reply, tvb(0, 1))
	oi:add(cf.opcode, tvb(0, 1))
	local si = t:add(cf.status, tvb(1, 1))
	t:add(cf.reserved, tvb(2, 2))
	t:add(cf.index, tvb(4, 4))
	t:add(cf.value, tvb(8, 8))
	local op_name = counter_ops[op] or string.format("op 0x%02x", op)
	local is_reply = op >= 0x80
	local text
	if is_reply then
		text = string.format("%s index %d value %s %s", op_name, index, tostring(value),
			counter_status[status] or ("status " .. status))
		if status ~= 0 then
			si:add_proto_expert_info(ex_counter_status)
		end
	elseif op == 0x01 then
		text = string.format("%s index %d delta %s", op_name, index, tostring(value))
	else
		text = string.format("%s index %d", op_name, index)
	end
	t:append_text(": " .. text)
	pinfo.cols.protocol = "innet/counter"
	pinfo.cols.info:append(": " .. text)
	return COUNTER_LEN
end

services:add(1, counter)

-- --------------------------------------------------------------------------
-- Service 2: consensus (paxos): src/consensus/wire.h, docs/protocol.md 2.2.

local paxos = Proto("innet.paxos", "innet consensus (Paxos)")
local PAXOS_LEN = 48
local paxos_types = { [1] = "REQUEST", [2] = "1A", [3] = "1B", [4] = "2A", [5] = "2B",
	[6] = "NACK", [7] = "TRIM", [8] = "RECOVER", [9] = "READ", [10] = "READ_ACK" }
local paxos_status = { [0] = "ok", [1] = "ballot", [2] = "ring_full", [3] = "trimmed",
	[4] = "too_big", [5] = "empty", [6] = "joining" }
local pf = paxos.fields
pf.type     = ProtoField.uint8("innet.paxos.type", "Type", base.DEC, paxos_types)
pf.status   = ProtoField.uint8("innet.paxos.status", "Status", base.DEC, paxos_status)
pf.node     = ProtoField.uint16("innet.paxos.node", "Acceptor/learner id", base.DEC)
pf.ballot   = ProtoField.uint32("innet.paxos.ballot", "Ballot", base.HEX)
pf.vballot  = ProtoField.uint32("innet.paxos.vballot", "Voted ballot", base.HEX)
pf.vlen     = ProtoField.uint16("innet.paxos.vlen", "Value length", base.DEC)
pf.reserved = ProtoField.uint16("innet.paxos.reserved", "Reserved", base.HEX)
pf.instance = ProtoField.uint64("innet.paxos.instance", "Instance", base.DEC)
pf.req_id   = ProtoField.uint64("innet.paxos.req_id", "Request id", base.HEX)
pf.trim     = ProtoField.uint64("innet.paxos.trim", "Trim", base.DEC)
pf.hi       = ProtoField.uint64("innet.paxos.hi", "Hi", base.DEC)
pf.value    = ProtoField.bytes("innet.paxos.value", "Value")
local ex_paxos_short = ProtoExpert.new("innet.paxos.short.expert",
	"Paxos header shorter than 48 bytes (switches drop it as too_short)",
	expert.group.MALFORMED, expert.severity.ERROR)
local ex_paxos_len = ProtoExpert.new("innet.paxos.len.expert",
	"vlen does not match the datagram (switches drop it as bad_length)",
	expert.group.MALFORMED, expert.severity.ERROR)
paxos.experts = { ex_paxos_short, ex_paxos_len }

function paxos.dissector(tvb, pinfo, tree)
	local len = tvb:len()
	local t = tree:add(paxos, tvb(0, math.min(len, PAXOS_LEN)))
	if len < PAXOS_LEN then
		t:add_proto_expert_info(ex_paxos_short)
		return len
	end
	local ty = tvb(0, 1):uint()
	local st = tvb(1, 1):uint()
	local vlen = tvb(12, 2):uint()
	t:add(pf.type, tvb(0, 1))
	t:add(pf.status, tvb(1, 1))
	t:add(pf.node, tvb(2, 2))
	t:add(pf.ballot, tvb(4, 4))
	t:add(pf.vballot, tvb(8, 4))
	local vi = t:add(pf.vlen, tvb(12, 2))
	t:add(pf.reserved, tvb(14, 2))
	t:add(pf.instance, tvb(16, 8))
	t:add(pf.req_id, tvb(24, 8))
	t:add(pf.trim, tvb(32, 8))
	t:add(pf.hi, tvb(40, 8))
	if len ~= PAXOS_LEN + vlen then
		vi:add_proto_expert_info(ex_paxos_len)
	end
	if vlen > 0 and len > PAXOS_LEN then
		tree:add(pf.value, tvb(PAXOS_LEN, math.min(vlen, len - PAXOS_LEN)))
	end
	local text = string.format("%s inst %s ballot 0x%x%s", paxos_types[ty] or ("type " .. ty),
		tostring(tvb(16, 8):uint64()), tvb(4, 4):uint(),
		st ~= 0 and (" " .. (paxos_status[st] or ("status " .. st))) or "")
	t:append_text(": " .. text)
	pinfo.cols.protocol = "innet/paxos"
	pinfo.cols.info:append(": " .. text)
	return len
end

services:add(2, paxos)

-- --------------------------------------------------------------------------
-- Service 3: aggregation (agg): src/agg/wire.h, docs/protocol.md 2.3.

local agg = Proto("innet.agg", "innet aggregation (all-reduce)")
local AGG_LEN = 32
local agg_ops = { [1] = "CONTRIB", [2] = "RESULT", [3] = "JOIN", [4] = "JOINED", [5] = "LEAVE" }
local agg_status = { [0] = "complete", [1] = "partial", [2] = "stale", [3] = "restarted" }
local af = agg.fields
af.op        = ProtoField.uint8("innet.agg.op", "Operation", base.DEC, agg_ops)
af.status    = ProtoField.uint8("innet.agg.status", "Status", base.DEC, agg_status)
af.job       = ProtoField.uint16("innet.agg.job", "Job", base.DEC)
af.slot      = ProtoField.uint16("innet.agg.slot", "Slot", base.DEC)
af.ver       = ProtoField.uint8("innet.agg.ver", "Shadow copy", base.DEC)
af.worker    = ProtoField.uint8("innet.agg.worker", "Worker", base.DEC)
af.round     = ProtoField.uint32("innet.agg.round", "Round", base.DEC)
af.offset    = ProtoField.uint32("innet.agg.offset", "Element offset", base.DEC)
af.exp       = ProtoField.uint8("innet.agg.exp", "Exponent (biased by 127)", base.DEC)
af.gen       = ProtoField.uint8("innet.agg.gen", "Generation (the job's run, mod 256)", base.DEC)
af.k         = ProtoField.uint16("innet.agg.k", "Elements", base.DEC)
af.call      = ProtoField.uint32("innet.agg.call", "Call", base.DEC)
af.bitmap    = ProtoField.uint64("innet.agg.bitmap", "Contributor bitmap", base.HEX)
af.elems     = ProtoField.bytes("innet.agg.elements", "Elements (int32, big-endian)")

local ex_agg_short = ProtoExpert.new("innet.agg.short.expert",
	"Aggregation header shorter than 32 bytes (the switch drops it as too_short)",
	expert.group.MALFORMED, expert.severity.ERROR)
local ex_agg_len = ProtoExpert.new("innet.agg.len.expert",
	"Element bytes do not match k x 4 (the switch drops it as bad_length)",
	expert.group.MALFORMED, expert.severity.ERROR)
local ex_agg_partial = ProtoExpert.new("innet.agg.partial.expert",
	"Partial or stale result (straggler timer)", expert.group.RESPONSE_CODE, expert.severity.WARN)
agg.experts = { ex_agg_short, ex_agg_len, ex_agg_partial }

function agg.dissector(tvb, pinfo, tree)
	local len = tvb:len()
	local t = tree:add(agg, tvb(0, math.min(len, AGG_LEN)))
	if len < AGG_LEN then
		t:add_proto_expert_info(ex_agg_short)
		return len
	end
	local op = tvb(0, 1):uint()
	local status = tvb(1, 1):uint()
	local k = tvb(18, 2):uint()
	t:add(af.op, tvb(0, 1))
	local si = t:add(af.status, tvb(1, 1))
	t:add(af.job, tvb(2, 2))
	t:add(af.slot, tvb(4, 2))
	t:add(af.ver, tvb(6, 1))
	t:add(af.worker, tvb(7, 1))
	t:add(af.round, tvb(8, 4))
	t:add(af.offset, tvb(12, 4))
	t:add(af.exp, tvb(16, 1))
	t:add(af.gen, tvb(17, 1))
	t:add(af.k, tvb(18, 2))
	t:add(af.call, tvb(20, 4))
	t:add(af.bitmap, tvb(24, 8))
	if len > AGG_LEN then
		t:add(af.elems, tvb(AGG_LEN, len - AGG_LEN))
	end
	local rec = (op == 3 or op == 4) and 12 or 4 -- JOIN/JOINED: 12-byte slot records
	if len - AGG_LEN ~= k * rec and not (op == 2 and status >= 2) and op ~= 4 then
		t:add_proto_expert_info(ex_agg_len)
	end
	local text = string.format("%s job %d slot %d round %d worker %d k %d",
		agg_ops[op] or ("op " .. op), tvb(2, 2):uint(), tvb(4, 2):uint(), tvb(8, 4):uint(),
		tvb(7, 1):uint(), k)
	if op == 2 then
		local bm = tvb(24, 8):uint64()
		local n = 0
		while bm ~= UInt64(0) do
			if bm:band(UInt64(1)) ~= UInt64(0) then n = n + 1 end
			bm = bm:rshift(1)
		end
		text = text .. " " .. (agg_status[status] or ("status " .. status)) ..
			string.format(" contributors %d gen %d", n, tvb(17, 1):uint())
		if status ~= 0 then
			si:add_proto_expert_info(ex_agg_partial)
		end
	end
	t:append_text(": " .. text)
	pinfo.cols.protocol = "innet/agg"
	pinfo.cols.info:append(": " .. text)
	return len
end

services:add(3, agg)

-- --------------------------------------------------------------------------
-- Service 4: inference (dnn): src/dnn/wire.h, docs/dnn.md.
--
--   0       1       2               4               8              12      14      16              20
--   | op    | stage | client_node   | infer_id      | model (CRC-32)| seq   | n     | offset        |
--
-- ACT (1): n int8 activations [offset, offset + n) of stage `stage`'s input,
-- input packet number seq. RESULT (2): n int32 logits (big-endian)
-- [offset, offset + n) from pipeline seq of the last stage, to client_node.

local dnn = Proto("innet.dnn", "innet inference (DNN)")
local DNN_LEN = 20
local dnn_ops = { [1] = "ACT", [2] = "RESULT" }
local df = dnn.fields
df.op          = ProtoField.uint8("innet.dnn.op", "Operation", base.DEC, dnn_ops)
df.stage       = ProtoField.uint8("innet.dnn.stage", "Stage", base.DEC)
df.client_node = ProtoField.uint16("innet.dnn.client_node", "Client node", base.DEC)
df.infer_id    = ProtoField.uint32("innet.dnn.infer_id", "Inference id", base.DEC)
df.model       = ProtoField.uint32("innet.dnn.model", "Model (CRC-32 of the model file)", base.HEX)
df.seq         = ProtoField.uint16("innet.dnn.seq", "Sequence (ACT: input packet; RESULT: pipeline)", base.DEC)
df.n           = ProtoField.uint16("innet.dnn.n", "Values", base.DEC)
df.offset      = ProtoField.uint32("innet.dnn.offset", "Offset of the first value", base.DEC)
df.acts        = ProtoField.bytes("innet.dnn.activations", "Activations (int8)")
df.logit       = ProtoField.int32("innet.dnn.logit", "Logit", base.DEC)
local ex_dnn_short = ProtoExpert.new("innet.dnn.short.expert",
	"DNN header shorter than 20 bytes (switches drop it as too_short)",
	expert.group.MALFORMED, expert.severity.ERROR)
local ex_dnn_len = ProtoExpert.new("innet.dnn.len.expert",
	"Values do not match n (ACT: n bytes, RESULT: 4 n; switches drop it as bad_chunk)",
	expert.group.MALFORMED, expert.severity.ERROR)
local ex_dnn_op = ProtoExpert.new("innet.dnn.op.expert",
	"Unknown operation (switches drop it as bad_op)", expert.group.MALFORMED, expert.severity.ERROR)
dnn.experts = { ex_dnn_short, ex_dnn_len, ex_dnn_op }

function dnn.dissector(tvb, pinfo, tree)
	local len = tvb:len()
	local t = tree:add(dnn, tvb(0, math.min(len, DNN_LEN)))
	if len < DNN_LEN then
		t:add_proto_expert_info(ex_dnn_short)
		return len
	end
	local op = tvb(0, 1):uint()
	local n = tvb(14, 2):uint()
	local offset = tvb(16, 4):uint()
	local oi = t:add(df.op, tvb(0, 1))
	t:add(df.stage, tvb(1, 1))
	t:add(df.client_node, tvb(2, 2))
	t:add(df.infer_id, tvb(4, 4))
	t:add(df.model, tvb(8, 4))
	t:add(df.seq, tvb(12, 2))
	local ni = t:add(df.n, tvb(14, 2))
	t:add(df.offset, tvb(16, 4))
	local body = len - DNN_LEN
	local text
	if op == 1 then
		if body ~= n then
			ni:add_proto_expert_info(ex_dnn_len)
		end
		if body > 0 then
			t:add(df.acts, tvb(DNN_LEN, body))
		end
		text = string.format("ACT id %d stage %d seq %d values [%d, %d)", tvb(4, 4):uint(),
			tvb(1, 1):uint(), tvb(12, 2):uint(), offset, offset + n)
	elseif op == 2 then
		if body ~= 4 * n then
			ni:add_proto_expert_info(ex_dnn_len)
		end
		local shown = {}
		for k = 0, math.min(n, math.floor(body / 4)) - 1 do
			t:add(df.logit, tvb(DNN_LEN + 4 * k, 4))
			if k < 10 then
				shown[#shown + 1] = tostring(tvb(DNN_LEN + 4 * k, 4):int())
			end
		end
		text = string.format("RESULT id %d pipe %d logits [%d, %d): %s%s", tvb(4, 4):uint(),
			tvb(12, 2):uint(), offset, offset + n, table.concat(shown, " "), n > 10 and " ..." or "")
	else
		oi:add_proto_expert_info(ex_dnn_op)
		text = "op " .. op
	end
	t:append_text(": " .. text)
	pinfo.cols.protocol = "innet/dnn"
	pinfo.cols.info:append(": " .. text)
	return len
end

services:add(4, dnn)

-- --------------------------------------------------------------------------
-- Service 5: load balancing (lb) — added by its issue.
