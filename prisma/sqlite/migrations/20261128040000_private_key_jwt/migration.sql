-- AlterTable
ALTER TABLE "partners" ADD COLUMN "credentials_policy" TEXT NOT NULL DEFAULT 'both';

-- CreateTable
CREATE TABLE "assertion_jtis" (
    "key_pair_id" TEXT NOT NULL,
    "jti" TEXT NOT NULL,
    "expires_at" DATETIME NOT NULL,

    PRIMARY KEY ("key_pair_id", "jti")
);

-- RedefineTables: secret_hash becomes nullable (a public_key pair has no secret).
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_key_pairs" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "partner_id" TEXT NOT NULL,
    "access_key" TEXT NOT NULL,
    "secret_hash" TEXT,
    "status" TEXT NOT NULL DEFAULT 'active',
    "created_at" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "superseded_at" DATETIME,
    "revoked_at" DATETIME,
    "last_used_at" DATETIME,
    "expires_at" DATETIME,
    "last_refused_at" DATETIME,
    "retires_at" DATETIME,
    "switched_at" DATETIME,
    "after_switch_seconds" INTEGER,
    "unlisted_refused_at" DATETIME,
    "unlisted_refused_address" TEXT,
    "leak_reported_at" DATETIME,
    "leak_url" TEXT,
    "kind" TEXT NOT NULL DEFAULT 'secret',
    "public_key" TEXT,
    "public_key_alg" TEXT,
    "kid" TEXT,
    CONSTRAINT "key_pairs_partner_id_fkey" FOREIGN KEY ("partner_id") REFERENCES "partners" ("id") ON DELETE RESTRICT ON UPDATE CASCADE
);
INSERT INTO "new_key_pairs" ("access_key", "after_switch_seconds", "created_at", "expires_at", "id", "last_refused_at", "last_used_at", "leak_reported_at", "leak_url", "partner_id", "retires_at", "revoked_at", "secret_hash", "status", "superseded_at", "switched_at", "unlisted_refused_address", "unlisted_refused_at") SELECT "access_key", "after_switch_seconds", "created_at", "expires_at", "id", "last_refused_at", "last_used_at", "leak_reported_at", "leak_url", "partner_id", "retires_at", "revoked_at", "secret_hash", "status", "superseded_at", "switched_at", "unlisted_refused_address", "unlisted_refused_at" FROM "key_pairs";
DROP TABLE "key_pairs";
ALTER TABLE "new_key_pairs" RENAME TO "key_pairs";
CREATE UNIQUE INDEX "key_pairs_access_key_key" ON "key_pairs"("access_key");
CREATE UNIQUE INDEX "key_pairs_kid_key" ON "key_pairs"("kid");
CREATE INDEX "key_pairs_partner_id_status_idx" ON "key_pairs"("partner_id", "status");
-- At most one active pair per partner (the partial index of the init migration, dropped with the old table).
CREATE UNIQUE INDEX "key_pairs_one_active_per_partner" ON "key_pairs"("partner_id") WHERE "status" = 'active';
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

-- CreateIndex
CREATE INDEX "assertion_jtis_expires_at_idx" ON "assertion_jtis"("expires_at");
