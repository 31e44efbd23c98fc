throw new Error('@prisma/streams-local is not installed: partnerctl does not use prisma dev (package.json overrides)');
