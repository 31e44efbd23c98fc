-- Names are unique ignoring case and Unicode form. The key is filled by partnerctl (NFC and case folding
-- are not SQL), which refuses to apply this migration when existing names collide (src/db/migrate.ts).
-- AlterTable
ALTER TABLE "partners" ADD COLUMN "name_key" TEXT;

-- CreateIndex
CREATE UNIQUE INDEX "partners_name_key_key" ON "partners"("name_key");
