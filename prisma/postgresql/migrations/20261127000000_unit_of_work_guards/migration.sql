-- AlterTable
ALTER TABLE "revision" ALTER COLUMN "value" SET DATA TYPE BIGINT;

-- AlterTable
ALTER TABLE "serve_instances" ALTER COLUMN "applied_revision" SET DATA TYPE BIGINT;

-- AlterTable
ALTER TABLE "webhook_events" ADD COLUMN "audit_seq" INTEGER;

-- CreateIndex
CREATE INDEX "audit_events_seq_idx" ON "audit_events"("seq");

-- CreateIndex
CREATE UNIQUE INDEX "webhook_events_audit_seq_key" ON "webhook_events"("audit_seq");

-- Hand-written (test/db/migrations.test.ts knows these, and the bodies spell semicolons \073 as in the audit-chain
-- migration). The rows a change writes with its audit events can be written only as a unit of work writes
-- them, whatever was granted: every role but the owner is held to it (docs/roles.md).
CREATE FUNCTION "partnerctl_in_this_transaction"(xid) RETURNS boolean LANGUAGE sql AS 'SELECT $1::text = (txid_current() % 4294967296)::text';

-- The revision moves by one, as the first statement of a change...
CREATE FUNCTION "revision_moves_by_one"() RETURNS trigger LANGUAGE plpgsql AS E'BEGIN IF pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), ''MEMBER'') THEN RETURN NEW\073 END IF\073 IF NEW.id IS DISTINCT FROM OLD.id OR NEW.value IS DISTINCT FROM OLD.value + 1 THEN RAISE EXCEPTION ''permission denied for table revision: it moves by one, as the first statement of a change (% to % refused for %)'', OLD.value, NEW.value, current_user USING ERRCODE = ''42501''\073 END IF\073 RETURN NEW\073 END';

CREATE TRIGGER "revision_moves_by_one" BEFORE UPDATE ON "revision" FOR EACH ROW EXECUTE FUNCTION "revision_moves_by_one"();

-- ...and commits only with that change's audit events.
CREATE FUNCTION "revision_with_audit"() RETURNS trigger LANGUAGE plpgsql AS E'BEGIN IF pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), ''MEMBER'') THEN RETURN NULL\073 END IF\073 IF partnerctl_in_this_transaction((SELECT xmin FROM audit_events WHERE seq IS NOT NULL ORDER BY seq DESC LIMIT 1)) IS NOT TRUE THEN RAISE EXCEPTION ''permission denied for table revision: it moves only with the audit events of a change (refused for %)'', current_user USING ERRCODE = ''42501''\073 END IF\073 RETURN NULL\073 END';

CREATE CONSTRAINT TRIGGER "revision_with_audit" AFTER UPDATE ON "revision" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "revision_with_audit"();

-- An audit event is appended under the write lock, with the sequence's next id, at the chain's head, with
-- the hash of its content (src/db/audit-hash.ts): exactly what the unit of work writes.
CREATE FUNCTION "audit_events_appended"() RETURNS trigger LANGUAGE plpgsql AS E'DECLARE head record\073 mark integer\073 canonical text\073 BEGIN IF pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), ''MEMBER'') THEN RETURN NEW\073 END IF\073 IF partnerctl_in_this_transaction((SELECT xmin FROM revision WHERE id = 1)) IS NOT TRUE THEN RAISE EXCEPTION ''permission denied for table audit_events: events are appended by a change that holds the write lock (the revision row, bumped first in its transaction)\073 refused for %'', current_user USING ERRCODE = ''42501''\073 END IF\073 SELECT legacy_through INTO mark FROM audit_chain WHERE id = 1\073 IF NEW.id <= GREATEST(COALESCE(mark, 0), COALESCE((SELECT max(id) FROM audit_events), 0)) THEN RAISE EXCEPTION ''permission denied for table audit_events: an event takes the next id of the sequence (% refused for %)'', NEW.id, current_user USING ERRCODE = ''42501''\073 END IF\073 SELECT seq, hash INTO head FROM audit_events WHERE seq IS NOT NULL ORDER BY seq DESC LIMIT 1\073 IF NEW.seq IS DISTINCT FROM COALESCE(head.seq, 0) + 1 OR NEW.prev_hash IS DISTINCT FROM COALESCE(head.hash, repeat(''0'', 64)) THEN RAISE EXCEPTION ''permission denied for table audit_events: an event extends the chain at its head (position % refused for %)'', NEW.seq, current_user USING ERRCODE = ''42501''\073 END IF\073 canonical := ''[1,'' || NEW.seq || '','' || to_json(to_char(NEW.at, ''YYYY-MM-DD"T"HH24:MI:SS.MS''))::text || '','' || to_json(NEW.actor)::text || '','' || to_json(session_user::text)::text || '',true,'' || to_json(NEW.action)::text || '','' || COALESCE(to_json(NEW.partner_id)::text, ''null'') || '','' || to_json(NEW.details)::text || '','' || to_json(NEW.prev_hash)::text || '']''\073 IF NEW.hash IS DISTINCT FROM encode(sha256(convert_to(canonical, ''UTF8'')), ''hex'') THEN RAISE EXCEPTION ''permission denied for table audit_events: an event carries the hash of its content (position % refused for %)'', NEW.seq, current_user USING ERRCODE = ''42501''\073 END IF\073 RETURN NEW\073 END';

CREATE TRIGGER "audit_events_appended" BEFORE INSERT ON "audit_events" FOR EACH ROW EXECUTE FUNCTION "audit_events_appended"();

-- The outbox: an event reports an audit event written in the same transaction, and says what it says, and a
-- delivery goes with its event to an endpoint that wants it. Roles that may read the signing secrets (the
-- server, the admin) could sign anything themselves and are not held to it (the server's reminders).
CREATE FUNCTION "webhook_events_vouched"() RETURNS trigger LANGUAGE plpgsql AS E'DECLARE audited record\073 BEGIN IF has_column_privilege(''webhook_endpoints'', ''secret'', ''SELECT'') THEN RETURN NEW\073 END IF\073 SELECT xmin, action, partner_id, actor, details INTO audited FROM audit_events WHERE seq = NEW.audit_seq ORDER BY id DESC LIMIT 1\073 IF NOT FOUND OR partnerctl_in_this_transaction(audited.xmin) IS NOT TRUE OR audited.action IS DISTINCT FROM NEW.type OR audited.partner_id IS DISTINCT FROM NEW.partner_id OR (NEW.data::jsonb - ''timestamp'') IS DISTINCT FROM jsonb_build_object(''type'', audited.action, ''data'', jsonb_build_object(''partner_id'', audited.partner_id, ''partner_name'', (SELECT name FROM partners WHERE id = audited.partner_id), ''actor'', audited.actor) || audited.details::jsonb) THEN RAISE EXCEPTION ''permission denied for table webhook_events: an event is written with the audit event it reports, in its transaction (refused for %)'', current_user USING ERRCODE = ''42501''\073 END IF\073 RETURN NEW\073 END';

CREATE TRIGGER "webhook_events_vouched" BEFORE INSERT ON "webhook_events" FOR EACH ROW EXECUTE FUNCTION "webhook_events_vouched"();

CREATE FUNCTION "webhook_deliveries_vouched"() RETURNS trigger LANGUAGE plpgsql AS E'BEGIN IF has_column_privilege(''webhook_endpoints'', ''secret'', ''SELECT'') THEN RETURN NEW\073 END IF\073 IF NEW.status IS DISTINCT FROM ''pending'' OR NEW.attempts IS DISTINCT FROM 0 OR NOT EXISTS ( SELECT 1 FROM webhook_events e JOIN webhook_endpoints w ON w.id = NEW.endpoint_id WHERE e.id = NEW.event_id AND partnerctl_in_this_transaction(e.xmin) AND (w.events IS NULL OR e.type = ANY (string_to_array(w.events, '',''))) AND (w.partner_id IS NULL OR w.partner_id = e.partner_id)) THEN RAISE EXCEPTION ''permission denied for table webhook_deliveries: a delivery is written with its event, to an endpoint that wants it (refused for %)'', current_user USING ERRCODE = ''42501''\073 END IF\073 RETURN NEW\073 END';

CREATE TRIGGER "webhook_deliveries_vouched" BEFORE INSERT ON "webhook_deliveries" FOR EACH ROW EXECUTE FUNCTION "webhook_deliveries_vouched"();
