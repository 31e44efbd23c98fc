-- AlterTable
ALTER TABLE "audit_events" ADD COLUMN "principal" TEXT,
ADD COLUMN "principal_verified" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN "seq" INTEGER,
ADD COLUMN "prev_hash" TEXT,
ADD COLUMN "hash" TEXT;

-- CreateTable
CREATE TABLE "audit_chain" (
    "id" INTEGER NOT NULL,
    "started_at" TIMESTAMP(3) NOT NULL,
    "legacy_through" INTEGER NOT NULL,

    CONSTRAINT "audit_chain_pkey" PRIMARY KEY ("id")
);

-- Where the chain starts: the events already written are chained by the migration runner right after this
-- migration (src/db/migrate.ts), and the chain vouches for them from now on.
INSERT INTO "audit_chain" ("id", "started_at", "legacy_through") SELECT 1, CURRENT_TIMESTAMP, COALESCE(MAX("id"), 0) FROM "audit_events";

-- Hand-written (test/db/migrations.test.ts knows these). The migration is run statement by statement,
-- split at every semicolon, so the function bodies spell theirs as \073 in an E'' string.
-- The principal is the login the database itself vouches for: whatever a client sends is replaced.
CREATE FUNCTION "audit_events_vouch"() RETURNS trigger LANGUAGE plpgsql AS E'BEGIN NEW.principal := session_user\073 NEW.principal_verified := true\073 RETURN NEW\073 END';

CREATE TRIGGER "audit_events_vouch" BEFORE INSERT ON "audit_events" FOR EACH ROW EXECUTE FUNCTION "audit_events_vouch"();

-- Append-only: UPDATE, DELETE and TRUNCATE are refused for every role but the table's owner (and its
-- members), whatever privileges were granted.
CREATE FUNCTION "audit_events_append_only"() RETURNS trigger LANGUAGE plpgsql AS E'BEGIN IF pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), ''MEMBER'') THEN RETURN COALESCE(NEW, OLD)\073 END IF\073 RAISE EXCEPTION ''permission denied for table audit_events: the audit trail is append-only (% refused for %)'', TG_OP, current_user USING ERRCODE = ''42501''\073 END';

CREATE TRIGGER "audit_events_append_only" BEFORE UPDATE OR DELETE ON "audit_events" FOR EACH ROW EXECUTE FUNCTION "audit_events_append_only"();

CREATE TRIGGER "audit_events_no_truncate" BEFORE TRUNCATE ON "audit_events" FOR EACH STATEMENT EXECUTE FUNCTION "audit_events_append_only"();
