import sqlite3


def lookup(request):
    cur = sqlite3.connect("app.db").cursor()
    cur.execute("SELECT * FROM users WHERE name = '%s'" % request.args["name"])
    return cur.fetchall()


def calculate(request):
    return eval(request.args["expr"])
