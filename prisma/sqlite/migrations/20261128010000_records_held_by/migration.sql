-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_gate_decisions_unrecorded" (
    "minute" DATETIME NOT NULL,
    "instance_id" TEXT NOT NULL,
    "key_kind" TEXT NOT NULL,
    "key_value" TEXT NOT NULL,
    "refusals" INTEGER NOT NULL DEFAULT 0,
    "held_by" TEXT NOT NULL DEFAULT '',

    PRIMARY KEY ("minute", "instance_id", "key_kind", "key_value", "held_by")
);
INSERT INTO "new_gate_decisions_unrecorded" ("minute", "instance_id", "key_kind", "key_value", "refusals", "held_by") SELECT "minute", "instance_id", "key_kind", "key_value", "refusals", '' FROM "gate_decisions_unrecorded";
DROP TABLE "gate_decisions_unrecorded";
ALTER TABLE "new_gate_decisions_unrecorded" RENAME TO "gate_decisions_unrecorded";
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;
